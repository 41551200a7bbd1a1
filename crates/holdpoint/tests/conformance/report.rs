//! Pass/fail/skip bookkeeping and the one-line summary.

#[derive(Default)]
pub struct Report {
    passed: usize,
    failed: Vec<(String, String)>,
    skipped: Vec<(String, String)>,
}

impl Report {
    pub fn record(&mut self, name: &str, result: Result<(), String>) {
        match result {
            Ok(()) => self.passed += 1,
            Err(e) => self.failed.push((name.to_owned(), e)),
        }
    }

    pub fn skip(&mut self, name: &str, why: &str) {
        self.skipped.push((name.to_owned(), why.to_owned()));
    }

    /// Prints failures and the summary; returns the number failed.
    pub fn finish(&self, label: &str, note: &str) -> usize {
        for (name, why) in &self.skipped {
            println!("  skipped: {name}: {why}");
        }
        for (name, err) in &self.failed {
            println!("  FAILED: {name}: {err}");
        }
        let skipped = if self.skipped.is_empty() {
            String::new()
        } else {
            format!(" ({} skipped)", self.skipped.len())
        };
        println!(
            "{label}: {} passed, {} failed{skipped}{note}",
            self.passed,
            self.failed.len()
        );
        self.failed.len()
    }
}
