//! `artifacts list|show|verify|prune`: the store `artifact.capture` writes, read and
//! tidied from the command line. A store over ssh (`--store ssh://HOST/DIR`) is reached
//! as a run reaches it (`--inventory`, `--ssh-config`), through the same store code: a
//! context of its own stands in for the run's, its commands shown nowhere.

use crate::actions::ctx::{Ctx, Mode};
use crate::base::cancel::Cancel;
use crate::base::error::{Error, Result};
use crate::cli::args::ArtifactsAction;
use crate::primitives::artifact::check_archive;
use crate::primitives::human_bytes;
use crate::primitives::store::{Fault, Store};
use crate::primitives::Step;
use crate::run::state;
use crate::targets::registry::RemoteSettings;
use std::path::PathBuf;
use std::rc::Rc;

pub async fn artifacts(
    action: ArtifactsAction,
    store: Option<String>,
    state_dir: Option<PathBuf>,
    remote: RemoteSettings,
) -> Result<()> {
    let ctx = Ctx::new(
        Mode::Real,
        "runbook artifacts".into(),
        None,
        Vec::new(),
        Rc::new(Cancel::default()),
        remote,
        None,
    );
    // A directory given relative to here, that is there: `--store ./artifacts`. Any
    // other word is for `Store::open` to read (a host's name is refused with the
    // spelling of its store, ssh://HOST/DIR).
    let given = match store {
        Some(s)
            if !s.contains("://") && !s.starts_with('/') && std::path::Path::new(&s).is_dir() =>
        {
            Some(
                std::path::absolute(&s)
                    .map_err(|e| Error::io(std::path::Path::new(&s), e))?
                    .display()
                    .to_string(),
            )
        }
        other => other,
    };
    let state = state::state_dir(state_dir);
    let store = Store::open(given.as_deref(), Some(&state), &ctx.targets).map_err(Error::Usage)?;
    let local = ctx.targets.local();
    let step = Step {
        ctx: &ctx,
        target: &local,
        at: "runbook artifacts".into(),
    };
    let done = act(&step, &store, action).await;
    ctx.targets.close_all().await;
    done
}

fn fault(f: Fault) -> Error {
    match f {
        Fault::Msg(m) => Error::Store(m),
        Fault::Stop(e) => Error::Store(e.to_string()),
    }
}

async fn act(step: &Step<'_>, store: &Store, action: ArtifactsAction) -> Result<()> {
    match action {
        ArtifactsAction::List => list(step, store).await,
        ArtifactsAction::Show { id } => {
            let m = store.get(step, &id).await.map_err(fault)?;
            println!(
                "{}",
                serde_json::to_string_pretty(&m).expect("a manifest serialises")
            );
            Ok(())
        }
        ArtifactsAction::Verify { id } => verify(step, store, id.as_deref()).await,
        ArtifactsAction::Prune { keep } => {
            if keep == 0 {
                return Err(Error::Usage(
                    "--keep 0 would delete every artifact; give at least 1".into(),
                ));
            }
            let gone = store.prune(step, keep).await.map_err(fault)?;
            println!(
                "deleted {} artifact(s) from {}{}",
                gone.len(),
                store.label(),
                if gone.is_empty() {
                    String::new()
                } else {
                    format!(": {}", gone.join(", "))
                }
            );
            Ok(())
        }
    }
}

async fn list(step: &Step<'_>, store: &Store) -> Result<()> {
    let all = store.list(step).await.map_err(fault)?;
    if all.is_empty() {
        println!("no artifacts in {}", store.label());
        return Ok(());
    }
    println!(
        "{:<16}  {:<20}  {:>10}  {:>8}  {:<14}  {:<20}  PATHS",
        "ID", "NAME", "SIZE", "FILES", "AGE", "MADE ON"
    );
    for m in &all {
        println!(
            "{:<16}  {:<20}  {:>10}  {:>8}  {:<14}  {:<20}  {}",
            m.id,
            m.name,
            human_bytes(m.bytes),
            m.files,
            m.age(),
            m.source,
            m.paths.join(", ")
        );
    }
    Ok(())
}

/// What a restore checks, for every artifact (or one): each object's sha256 (read back
/// here, from a store over ssh too), then every entry of it.
async fn verify(step: &Step<'_>, store: &Store, id: Option<&str>) -> Result<()> {
    let all = match id {
        Some(id) => vec![store.get(step, id).await.map_err(fault)?],
        None => store.list(step).await.map_err(fault)?,
    };
    let mut bad = Vec::new();
    for m in &all {
        for part in &m.parts {
            let problem = match store.read_object(step, part).await {
                Err(Fault::Msg(e)) => Some(e),
                Err(stop @ Fault::Stop(_)) => return Err(fault(stop)),
                Ok(bytes) => check_archive(&bytes).err().map(|r| r.join("; ")),
            };
            match problem {
                Some(p) => {
                    println!("{} {} ({}): refused: {p}", m.id, m.name, part.path);
                    bad.push(m.id.clone());
                }
                None => println!("{} {} ({}): ok", m.id, m.name, part.path),
            }
        }
    }
    if bad.is_empty() {
        println!("{} artifact(s) verified in {}", all.len(), store.label());
        return Ok(());
    }
    Err(Error::ArtifactsDamaged(format!(
        "{} of {} artifact(s) in {} would be refused by a restore: {}",
        bad.len(),
        all.len(),
        store.label(),
        bad.join(", ")
    )))
}
