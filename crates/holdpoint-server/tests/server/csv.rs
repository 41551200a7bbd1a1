//! The audit page's CSV export guards every cell a spreadsheet would read
//! as a formula (issue 32, finding 13): the page's own `csvCell`, run in
//! Node.js.

use std::process::Command;

/// The `csvCell` function of the audit page, as shipped.
fn csv_cell_source() -> String {
    let page = include_str!("../../web/audit.js");
    let start = page.find("function csvCell(").expect("audit.js defines csvCell");
    let end = page[start..].find("\n}\n").expect("csvCell ends") + start + 3;
    page[start..end].to_owned()
}

#[test]
fn formula_cells_are_quoted_with_an_apostrophe() {
    if Command::new("node").arg("--version").output().is_err() {
        assert!(std::env::var_os("CI").is_none(), "CI needs node for the CSV check");
        eprintln!("skipping: node not found");
        return;
    }
    let cells = [
        "=1+1",
        "+1",
        "-2",
        "@SUM(A1)",
        "\tcmd",
        "\rcmd",
        "plain",
        "a\tb",
        "say \"hi\"",
    ];
    let script = format!(
        "{}\nconsole.log(JSON.stringify({}.map(csvCell)));",
        csv_cell_source(),
        serde_json::to_string(&cells).unwrap()
    );
    let out = Command::new("node").arg("-e").arg(&script).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let got: Vec<String> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        got,
        [
            "\"'=1+1\"",
            "\"'+1\"",
            "\"'-2\"",
            "\"'@SUM(A1)\"",
            "\"'\tcmd\"",
            "\"'\rcmd\"",
            "plain",
            "a\tb",
            "\"say \"\"hi\"\"\"",
        ]
    );
}
