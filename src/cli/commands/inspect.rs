//! `check`, `show` and `list`: load runbooks without running a single step.

use crate::actions::ctx::Mode;
use crate::base::cancel::Cancel;
use crate::base::embedded;
use crate::base::error::{Error, Result};
use crate::run::engine::{self, Loaded};
use crate::run::source::{self, Source};
use crate::targets::registry::RemoteSettings;
use std::path::{Path, PathBuf};

fn inspect(
    source: &Source,
    sets: Vec<(String, String)>,
    remote: &RemoteSettings,
) -> Result<Loaded> {
    engine::load(source, Mode::Inspect, sets, Cancel::new(), remote.clone())
}

pub async fn check(
    files: &[String],
    sets: Vec<(String, String)>,
    remote: RemoteSettings,
) -> Result<()> {
    let mut bad = 0;
    for f in files {
        match source::locate(f).and_then(|s| inspect(&s, sets.clone(), &remote).map(|l| (s, l))) {
            Ok((s, loaded)) => {
                let h = loaded.header();
                println!(
                    "ok: {} (runbook '{}', {} params, {} steps)",
                    s.label,
                    crate::base::printable::line(&h.name),
                    h.params.len(),
                    loaded.step_count()
                );
                drop(loaded);
                // What only running the steps' code shows, planned offline: nothing is
                // contacted or changed.
                for w in engine::offline_warnings(&s, &h, sets.clone(), remote.clone()).await {
                    eprintln!(
                        "warning: {}: {}",
                        s.label,
                        crate::base::printable::block(&w)
                    );
                }
            }
            Err(e) => {
                bad += 1;
                let e = crate::base::secrets::mask_global(&e.to_string());
                eprintln!("error: {}", crate::base::printable::block(&e));
            }
        }
    }
    if bad > 0 {
        Err(Error::CheckFailed {
            bad,
            of: files.len(),
        })
    } else {
        Ok(())
    }
}

/// `println!` into a String.
macro_rules! outln {
    ($out:ident, $($arg:tt)*) => {{
        use std::fmt::Write as _;
        let _ = writeln!($out, $($arg)*);
    }};
}

pub fn show(file: &str, remote: RemoteSettings) -> Result<()> {
    let source = source::locate(file)?;
    let loaded = inspect(&source, Vec::new(), &remote)?;
    let h = loaded.header();
    // Built whole, then masked: a step name or description made from a secret param
    // (given through RUNBOOK_PARAM_*) must not show.
    let mut out = String::new();
    outln!(out, "{} ({})", h.name, source.label);
    if let Some(d) = &h.description {
        outln!(out, "  {d}");
    }
    outln!(out, "\nparams:");
    if h.params.is_empty() {
        outln!(out, "  (none)");
    }
    for p in &h.params {
        let mut facts = vec![p.ty.name().to_string()];
        if p.required {
            facts.push("required".into());
        }
        if p.secret {
            facts.push("secret".into());
        }
        if let Some(d) = &p.default {
            facts.push(format!(
                "default {}",
                if p.secret { "***".into() } else { d.display() }
            ));
        }
        if !p.choices.is_empty() {
            let c: Vec<String> = p.choices.iter().map(|c| c.display()).collect();
            facts.push(format!("one of {}", c.join("|")));
        }
        outln!(out, "  {:<14} {}", p.name, facts.join(", "));
        if let Some(help) = &p.help {
            outln!(out, "  {:<14} {help}", "");
        }
    }
    outln!(out, "\nsteps:");
    for (i, s) in loaded.steps().iter().enumerate() {
        let mut opts = Vec::new();
        if s.opts.retries > 0 {
            opts.push(format!("retries={}", s.opts.retries));
        }
        if let Some(t) = s.opts.timeout {
            opts.push(format!("timeout={}", crate::base::duration::short(t)));
        }
        if s.opts.when.is_some() {
            opts.push("when".into());
        }
        if s.opts.always {
            opts.push("always".into());
        }
        if s.opts.confirm {
            opts.push("confirm".into());
        }
        let opts = if opts.is_empty() {
            String::new()
        } else {
            format!("  [{}]", opts.join(", "))
        };
        outln!(out, "  {}. {}{opts}  ({})", i + 1, s.name, s.location);
    }
    // A runbook from elsewhere (a cloned repository) names its steps as it likes.
    print!(
        "{}",
        crate::base::printable::block(&crate::base::secrets::mask_global(&out))
    );
    Ok(())
}

fn describe(source: &Source, remote: &RemoteSettings) -> (String, String) {
    match inspect(source, Vec::new(), remote) {
        Ok(l) => {
            let h = l.header();
            (h.name, h.description.unwrap_or_default())
        }
        Err(e) => (
            "(invalid)".into(),
            e.to_string().lines().next().unwrap_or_default().to_string(),
        ),
    }
}

pub fn list(dir: Option<PathBuf>, remote: RemoteSettings) -> Result<()> {
    let dir = dir.unwrap_or_else(|| {
        if Path::new("runbooks").is_dir() {
            "runbooks".into()
        } else {
            ".".into()
        }
    });
    let entries = std::fs::read_dir(&dir)
        .map_err(|e| Error::Usage(format!("cannot list {}: {e}", dir.display())))?;
    let mut files: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "lua") && p.is_file())
        .collect();
    files.sort();
    println!("{}:", dir.display());
    if files.is_empty() {
        println!("  (no .lua files)");
    }
    for f in files {
        let (name, desc) = match source::locate(&f.display().to_string()) {
            Ok(s) => describe(&s, &remote),
            Err(e) => ("(unreadable)".into(), e.to_string()),
        };
        let line = format!("  {:<28} {:<20} {desc}", f.display(), name);
        println!(
            "{}",
            crate::base::printable::line(&crate::base::secrets::mask_global(&line))
        );
    }
    println!("\nshipped (run by name):");
    for (name, _) in embedded::SHIPPED {
        if let Some(s) = Source::shipped(name) {
            let (_, desc) = describe(&s, &remote);
            println!("  {name:<28} {desc}");
        }
    }
    Ok(())
}
