//! `holdpoint receipt verify`: checks an approval receipt offline against
//! the issuer's public keys (docs/reference.md, "Approval receipts").

use clap::{Args, Subcommand};
use holdpoint::receipt::{Expect, Jwks, verify, verify_unbound};
use serde_json::Value;

use crate::error::CliError;

/// `receipt …`.
#[derive(Subcommand, Debug)]
pub enum ReceiptCommand {
    /// Check a receipt's signature against a JWKS, its expiry, and (when
    /// given) the tool, input and hold it must be for; prints its claims.
    /// Exits 1 when it does not verify.
    Verify(VerifyArgs),
}

/// `receipt verify` arguments.
#[derive(Args, Debug)]
pub struct VerifyArgs {
    /// The receipt (the compact JWS the tool got from `ctx.receipt()`).
    pub token: String,
    /// The public keys: a file, or an http(s) URL such as
    /// http://HOST:PORT/.well-known/holdpoint-receipts.json.
    #[arg(long, value_name = "URL|FILE")]
    pub jwks: String,
    /// The tool the receipt must be for.
    #[arg(long, requires = "input")]
    pub tool: Option<String>,
    /// The input (JSON) the receipt must bind.
    #[arg(long, value_name = "JSON", requires = "tool")]
    pub input: Option<String>,
    /// The hold it must be for: SNAPSHOT or SNAPSHOT#REF.
    #[arg(long, value_name = "SNAPSHOT[#REF]", requires = "tool")]
    pub hold: Option<String>,
}

/// Runs a `receipt` command.
pub async fn run(command: ReceiptCommand, json: bool) -> Result<(), CliError> {
    let ReceiptCommand::Verify(args) = command;
    let jwks = load_jwks(&args.jwks).await?;
    let expect = match (&args.tool, &args.input) {
        (Some(tool), Some(raw)) => {
            let input: Value =
                serde_json::from_str(raw).map_err(|e| CliError::Usage(format!("--input is not valid JSON ({e})")))?;
            let mut expect = Expect::new(tool.clone(), &input);
            if let Some(hold) = &args.hold {
                let (snapshot, reference) = match hold.split_once('#') {
                    Some((s, r)) => (s, Some(r)),
                    None => (hold.as_str(), None),
                };
                expect = expect.hold(snapshot, reference);
            }
            Some(expect)
        }
        _ => None,
    };
    // Without --tool/--input only the signature and expiry are checked:
    // the receipt is verified against what it claims to bind.
    let receipt = match &expect {
        Some(expect) => verify(&args.token, &jwks, expect),
        None => verify_unbound(&args.token, &jwks),
    }
    .map_err(|e| CliError::NotFound(format!("receipt does not verify: {e}")))?;
    let s = &receipt.subject;
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&receipt.to_json()).unwrap_or_default()
        );
    } else {
        println!(
            "valid receipt: {} {} of {} on {}",
            s.decision.as_str(),
            s.tool,
            s.input_sha256,
            s.agent
        );
        if let Some(hold) = s.hold_id() {
            println!("hold:    {hold}");
        }
        for a in &s.actors {
            println!("actor:   {} [{}]", a.id, a.roles.join(", "));
        }
        if let Some(rule) = &s.rule {
            let quorum = s
                .quorum
                .map(|q| format!(" (quorum {}/{})", q.reached, q.required))
                .unwrap_or_default();
            println!("rule:    {rule}{quorum}");
        }
        if let Some(grant) = &s.grant {
            println!("grant:   {grant}");
        }
        println!("expires: {} (unix seconds)", receipt.exp);
        if expect.is_none() {
            println!("(not checked against a call: give --tool and --input)");
        }
    }
    Ok(())
}

async fn load_jwks(source: &str) -> Result<Jwks, CliError> {
    let text = if source.starts_with("http://") || source.starts_with("https://") {
        let response = reqwest::get(source)
            .await
            .map_err(|e| CliError::Server(format!("{source}: {e}")))?;
        if !response.status().is_success() {
            return Err(CliError::Server(format!("{source}: HTTP {}", response.status())));
        }
        response
            .text()
            .await
            .map_err(|e| CliError::Server(format!("{source}: {e}")))?
    } else {
        std::fs::read_to_string(source).map_err(|e| CliError::Usage(format!("--jwks {source}: {e}")))?
    };
    Jwks::from_json(&text).map_err(|e| CliError::Usage(format!("--jwks {source}: {e}")))
}
