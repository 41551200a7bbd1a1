//! What the operator sees: aligned tables, JSON, and a spinner on
//! standard error while a slow call runs (only when it is a terminal).

use std::future::Future;
use std::io::{IsTerminal, Write};
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;

/// A table with a header row, printed with aligned columns.
pub struct Table {
    header: Vec<&'static str>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column names.
    pub fn new(header: Vec<&'static str>) -> Self {
        Table {
            header,
            rows: Vec::new(),
        }
    }

    /// Adds a row.
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// The table as text, or `empty` when it has no rows.
    pub fn render(&self, empty: &str) -> String {
        if self.rows.is_empty() {
            return format!("{empty}\n");
        }
        let mut widths: Vec<usize> = self.header.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let line = |cells: Vec<&str>| {
            let mut out = String::new();
            for (i, (cell, w)) in cells.iter().zip(&widths).enumerate() {
                if i + 1 == cells.len() {
                    out.push_str(cell);
                } else {
                    out.push_str(&format!("{cell:<w$}  "));
                }
            }
            out.trim_end().to_owned() + "\n"
        };
        let mut out = line(self.header.clone());
        for row in &self.rows {
            out.push_str(&line(row.iter().map(String::as_str).collect()));
        }
        out
    }
}

/// Prints `value` as pretty JSON.
pub fn print_json<T: Serialize>(value: &T) -> std::io::Result<()> {
    let text = serde_json::to_string_pretty(value).map_err(std::io::Error::other)?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{text}")
}

/// Prints text as is.
pub fn print(text: &str) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
}

/// A time as `2026-01-02 15:04:05`.
pub fn time(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M:%S").to_string()
}

/// `text` cut to `max` characters (with `…`).
pub fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut s: String = text.chars().take(max.saturating_sub(1)).collect();
    s.push('…');
    s
}

/// Runs `fut`, showing `label` and a spinner on standard error after a
/// short while when standard error is a terminal.
pub async fn with_progress<F: Future>(label: &str, fut: F) -> F::Output {
    if !std::io::stderr().is_terminal() {
        return fut.await;
    }
    let label = label.to_owned();
    let spinner = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let frames = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
        for i in 0usize.. {
            eprint!("\r{} {label}", frames[i % frames.len()]);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    let out = fut.await;
    spinner.abort();
    eprint!("\r\x1b[2K");
    out
}

/// Reports a count on standard error when it is a terminal (for long
/// listings: `42 sessions from 311 snapshots`).
pub fn count(text: &str) {
    if std::io::stderr().is_terminal() {
        eprintln!("{text}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_align() {
        let mut t = Table::new(vec!["A", "LONGER"]);
        t.row(vec!["xyz".into(), "1".into()]);
        assert_eq!(t.render(""), "A    LONGER\nxyz  1\n");
        assert_eq!(Table::new(vec!["A"]).render("none"), "none\n");
    }
}
