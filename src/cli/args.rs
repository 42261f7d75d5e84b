//! The command line. Its words are a contract: see README and `runbook --help`.

use crate::base::duration;
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;
use std::time::Duration;

const EXIT_CODES: &str = "\
Exit codes:
  0    success
  1    the run ran and a step failed (or its record broke off);
       `fmt --check` found files to format; `audit verify` found a record tampered with
  2    refused before anything was changed: usage, the runbook, its params,
       a resume or a plan that cannot go ahead, no confirmation
  3    runbook test: a command had no reply (or, with --strict, replies were left unused)
  130  interrupted (SIGINT / Ctrl-C); 143 for SIGTERM

Environment:
  RUNBOOK_STATE_DIR    where run records go (default: $XDG_STATE_HOME/runbook or ~/.local/state/runbook)
  RUNBOOK_PARAM_<KEY>  a param value, like --set KEY=VALUE (handy for secrets)
  RUNBOOK_LOG          log filter for -v style diagnostics (e.g. debug)
  NO_COLOR             turn colour off";

const TEST_HELP: &str = "\
The run is the one `runbook run --yes` makes (confirmation assumed, run locks taken at once),
its record kept in a private temporary state dir that is removed afterwards: the real
state dir (fingerprints, history) is not read or written. See docs/authoring.md, \
\"Testing a runbook without hosts\".

Exit codes:
  0    the runbook passed, every command answered
  1    the runbook failed, as `runbook run` would have (a step failed)
  2    refused before it ran: usage, the runbook, its params, the replies file
  3    a command had no reply (shown with the closest recorded one and the difference),
       or, with --strict, replies were left unused
  130  interrupted (SIGINT / Ctrl-C); 143 for SIGTERM";

const WATCH_HELP: &str = "\
Plans are written to the watch file's plans directory (ID.json, ID.md); review one with
`runbook plan ID.json --format md`, approve it with `runbook approve`, apply it with
`runbook apply`, each from the directory the watcher runs in; reject it with
`runbook watch FILE --reject ID`. See docs/watch.md.

Exit codes:
  0    stopped by SIGTERM or SIGINT (state saved), or --once looked at every trigger
  2    refused to start: the watch file (names FILE:LINE), its state, its listener";

const AUDIT_HELP: &str = "\
Each line of a run record carries its place (seq) and the sha256 of the line before it
(prev); the index of runs (<state>/run-index.jsonl, chained the same way) keeps each
record's line count and last hash. A record is ok, incomplete (no run_finished: killed,
or still running; not a failure), unchained (made before records were chained; not a
failure), or names its first bad line: edited, out of order or dropped, truncated,
deleted, added after it was closed.

Exit codes:
  0    every record checked is ok, incomplete or unchained, and so is the index
  1    a record or the index was tampered with (each is named)
  2    no such run, or the state dir cannot be read";

#[derive(Debug, Parser)]
#[command(
    name = "runbook",
    version,
    about = "Run operations runbooks written in Lua: preview with --dry-run, run, keep a record",
    after_help = EXIT_CODES,
    propagate_version = true
)]
pub struct Cli {
    /// Show every line of command output and debug logs.
    #[arg(short, long, global = true, conflicts_with = "quiet")]
    pub verbose: bool,

    /// Only show failures, warnings and the summary.
    #[arg(short, long, global = true)]
    pub quiet: bool,

    #[command(subcommand)]
    pub command: Command,
}

/// `runbook artifacts …`
#[derive(Debug, Subcommand)]
pub enum ArtifactsAction {
    /// Every artifact, newest first: id, name, size, age, where it was made.
    List,
    /// One artifact's manifest (ID or the start of one), as JSON.
    Show { id: String },
    /// Check every stored archive (or ID's) against its sha256 and read its entries as
    /// a restore does: exit 1 naming each one that would be refused.
    Verify { id: Option<String> },
    /// Delete all but the newest N artifacts of each name and key.
    Prune {
        #[arg(long, value_name = "N")]
        keep: usize,
    },
}

/// `runbook audit …`
#[derive(Debug, Subcommand)]
pub enum AuditAction {
    /// Verify RUN's record (a run id, a prefix of one, or `last`), or with --all every
    /// record and every run the index lists: one line each, exit 1 if any was tampered with.
    #[command(after_help = AUDIT_HELP)]
    Verify {
        #[arg(required_unless_present = "all", conflicts_with = "all")]
        run: Option<String>,
        #[arg(long)]
        all: bool,
        /// One JSON object a line, for each record and the index.
        #[arg(long)]
        json: bool,
        #[arg(long, env = "RUNBOOK_STATE_DIR", value_name = "DIR")]
        state_dir: Option<PathBuf>,
    },
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a runbook (or preview it with --dry-run).
    #[command(after_help = EXIT_CODES)]
    Run(RunArgs),
    /// Make a plan: run the reads, plan the changes (what --dry-run does), and print it,
    /// or save it with -o for `runbook apply`. Given a saved PLAN.json, show that plan.
    Plan(PlanArgs),
    /// Apply a saved plan: refused unless the runbook, params and targets are the ones
    /// it was made for; each change, when reached, must be the planned one.
    #[command(after_help = EXIT_CODES)]
    Apply(ApplyArgs),
    /// Approve a saved plan as a second person: its reads are run again against the
    /// targets now, the plan and any difference are shown, and on "yes" a signed
    /// approval with an expiry is appended to PLAN.approvals (SSH keys, `ssh-keygen -Y`).
    #[command(after_help = EXIT_CODES)]
    Approve(ApproveArgs),
    /// Test a runbook with no host: every command is answered from replies saved by
    /// `runbook run … --save-replies R.jsonl` (edit them to make a failure), matched by
    /// target and command, in order for repeats; nothing is contacted or run.
    #[command(after_help = TEST_HELP)]
    Test(TestArgs),
    /// Load and validate runbooks (syntax, header, params, steps); contacts nothing.
    Check {
        /// Runbook files or names.
        #[arg(required = true)]
        files: Vec<String>,
        /// Values for params, to validate them too.
        #[arg(long = "set", value_name = "KEY=VALUE", value_parser = parse_set)]
        sets: Vec<(String, String)>,
        /// A params file (TOML), to validate it and its values too.
        #[arg(long = "params", value_name = "FILE")]
        params: Option<PathBuf>,
        #[command(flatten)]
        remote: RemoteArgs,
    },
    /// Format Lua files with StyLua (settings: the nearest stylua.toml or .stylua.toml, else runbook's style).
    #[command(
        after_help = "Directories are searched for *.lua recursively, skipping hidden and \
git-ignored files; with no PATH, the current directory. A file that does not parse is \
an error (exit 2) and nothing is written. --check writes nothing, names each file that \
formatting would change with a diff, and exits 1 if there is any."
    )]
    Fmt {
        /// Files or directories (default: the current directory).
        paths: Vec<PathBuf>,
        /// Write nothing; list unformatted files with a diff, exit 1 if there are any.
        #[arg(long)]
        check: bool,
    },
    /// List runbooks in a directory (default: ./runbooks, else .) and the shipped ones.
    List {
        dir: Option<PathBuf>,
        /// The names runbooks give targets at their top level resolve as in a run.
        #[command(flatten)]
        remote: RemoteArgs,
    },
    /// Show a runbook's params (type, default, help) and steps in order.
    Show {
        file: String,
        /// The names the runbook gives targets at its top level resolve as in a run.
        #[command(flatten)]
        remote: RemoteArgs,
    },
    /// List earlier runs from the run records, the latest last; the filters narrow them
    /// down (all of them must hold), then -n keeps the latest N.
    History {
        /// How many of the latest runs to show.
        #[arg(short = 'n', long, default_value_t = 20)]
        limit: usize,
        #[command(flatten)]
        filter: HistoryFilter,
        #[arg(long, env = "RUNBOOK_STATE_DIR", value_name = "DIR")]
        state_dir: Option<PathBuf>,
    },
    /// Show what happened in a run: RUN is a run id (or a prefix of one) or `last`.
    Log {
        run: String,
        /// Print the raw JSONL record.
        #[arg(long)]
        json: bool,
        #[arg(long, env = "RUNBOOK_STATE_DIR", value_name = "DIR")]
        state_dir: Option<PathBuf>,
    },
    /// List commands still running on targets: detached ones (`detach = true`) and those
    /// a killed run left behind, with their run and step. TARGET: where to look (default:
    /// every target the latest run records name, and this machine).
    Ps {
        targets: Vec<String>,
        /// One JSON object a line.
        #[arg(long)]
        json: bool,
        #[arg(long, env = "RUNBOOK_STATE_DIR", value_name = "DIR")]
        state_dir: Option<PathBuf>,
        #[command(flatten)]
        remote: RemoteArgs,
    },
    /// End what a run left running on its targets (its detached commands, and commands it
    /// lost track of when killed), without resuming it. RUN is a run id (or a prefix) or
    /// `last`.
    Stop {
        run: String,
        #[arg(long, env = "RUNBOOK_STATE_DIR", value_name = "DIR")]
        state_dir: Option<PathBuf>,
        #[command(flatten)]
        remote: RemoteArgs,
    },
    /// Check run records for tampering: each line against the hash chain of its record,
    /// each record against the index of runs.
    #[command(after_help = AUDIT_HELP)]
    Audit {
        #[command(subcommand)]
        action: AuditAction,
    },
    /// The Lua API reference. TOPIC is a module (target, step, runbook, log, control) or a function name.
    Docs {
        topic: Option<String>,
        /// Print the whole reference as Markdown (as in docs/lua-api.md).
        #[arg(long)]
        markdown: bool,
        /// Print what the Lua VM defines, as JSON (for the docs test).
        #[arg(long, hide = true, conflicts_with_all = ["topic", "markdown"])]
        globals: bool,
    },
    /// Print one of the scripts runbook runs on targets (NAME as previews show it, e.g.
    /// venv-build), or list them: a preview's `NAME.sh ARG…` runs by hand as
    /// `sh -c "$(runbook script NAME)" sh ARG…`.
    Script { name: Option<String> },
    /// Print a shell completion script.
    Completions { shell: clap_complete::Shell },
    /// The artifact store: the compile caches `artifact.capture` kept.
    Artifacts {
        #[command(subcommand)]
        action: ArtifactsAction,
        /// The store: a directory here (default: `artifacts` in the state dir), or
        /// ssh://HOST/DIR, the directory /DIR on HOST (an inventory name, an ssh_config
        /// Host, user@host[:port]), as artifact.capture's `store` names it.
        #[arg(long, value_name = "DIR|ssh://HOST/DIR", global = true)]
        store: Option<String>,
        #[arg(long, env = "RUNBOOK_STATE_DIR", value_name = "DIR", global = true)]
        state_dir: Option<PathBuf>,
        /// Inventory of named hosts, for a store's HOST (default: ./inventory.toml when
        /// present).
        #[arg(long, value_name = "FILE", env = "RUNBOOK_INVENTORY", global = true)]
        inventory: Option<PathBuf>,
        /// Use this ssh_config instead of ~/.ssh/config, for a store's HOST.
        #[arg(long, value_name = "FILE", global = true)]
        ssh_config: Option<PathBuf>,
        /// Accept the host key of a store's HOST never seen before (a changed key still
        /// fails).
        #[arg(long, global = true)]
        trust_new_hosts: bool,
    },
    /// Send what earlier runs left in the spool to the sinks of runbook.toml (`[[sink]]`):
    /// events a sink did not confirm before its run ended. Each run sends them first
    /// anyway; this is for a sink that came back while no run is due. Exit 1 naming each
    /// sink that still has some.
    Ship {
        /// How long to wait for the sinks at most.
        #[arg(long, value_name = "DUR", value_parser = parse_duration, default_value = "30s")]
        wait: Duration,
        #[arg(long, env = "RUNBOOK_STATE_DIR", value_name = "DIR")]
        state_dir: Option<PathBuf>,
    },
    /// Watch for trouble and propose a recovery plan: the triggers of a watch file (a
    /// number in a log below a threshold for a while, gpu.health critical, an Alertmanager
    /// webhook) each make the plan of a runbook, written beside it for review, and
    /// notify; nothing is applied without the approvals the policy asks (docs/watch.md).
    /// Runs in the foreground until SIGTERM (exit 0); --once looks once and exits.
    #[command(after_help = WATCH_HELP)]
    Watch(WatchArgs),
    /// Set up editor support in DIR (default: here): `.luarc.json` and runbook's Lua API
    /// types in `.runbook/types/` for lua-language-server and EmmyLua (rewritten each time;
    /// an existing `.luarc.json` is kept, and what it lacks is printed).
    Init { dir: Option<PathBuf> },
    /// Write NAME.lua, a runbook to start from: a param, a read step, a change step and an
    /// `always` cleanup, for a target of the kind --target names. Never overwrites a file.
    New {
        name: String,
        /// The kind of target the skeleton runs on.
        #[arg(long, value_enum, default_value = "local")]
        target: NewTarget,
        /// Where to write NAME.lua (default: here).
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
}

/// Which runs `runbook history` lists.
#[derive(Debug, Args, Clone, Default)]
pub struct HistoryFilter {
    /// Runs of this runbook: its name (the RUNBOOK column), or its file (the FILE
    /// column, or that file's name alone); `*` and `?` match any text and any one
    /// character.
    #[arg(long, value_name = "NAME")]
    pub runbook: Option<String>,

    /// Runs that ran (or, dry-runs, planned) a command on this target: its name as
    /// records give it (an inventory name, user@host, node1/ct200); a container on it
    /// counts too; `*` and `?` as for --runbook. Reads each record to its end.
    #[arg(long, value_name = "TARGET")]
    pub target: Option<String>,

    /// Runs that did not succeed: failed or interrupted.
    #[arg(long)]
    pub failed: bool,

    /// Runs started since then: a duration back from now (`2h`, `7d`) or a UTC date or
    /// time (`2026-12-01`, `2026-12-01T09:30:00Z`).
    #[arg(long, value_name = "DURATION|DATE", value_parser = parse_since)]
    pub since: Option<std::time::SystemTime>,
}

/// The targets `runbook new --target` writes a skeleton for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum NewTarget {
    /// This machine.
    Local,
    /// A host over SSH.
    Ssh,
    /// A Proxmox LXC container, through `pct` on its node.
    Pct,
}

/// What `run` and `apply` share about the run itself: where its record goes and how long
/// it may take (one definition, so the two commands' flags cannot drift apart).
#[derive(Debug, Args)]
pub struct RunLimits {
    /// Where run records are kept.
    #[arg(long, env = "RUNBOOK_STATE_DIR", value_name = "DIR")]
    pub state_dir: Option<PathBuf>,

    /// Stop the whole run after this long (e.g. 30m, at most 365d; 0 means no timeout); `always` steps still run.
    #[arg(long, value_name = "DUR", value_parser = parse_timeout)]
    pub timeout: Option<Duration>,

    /// How long to wait when another run holds the lock on a target this run changes (at most 365d; 0: do not wait).
    #[arg(long, value_name = "DUR", value_parser = parse_duration, default_value = "0s")]
    pub lock_wait: Duration,

    /// Keep each SSH connection open this long (idle) after the run, so that a run within it skips the handshake (e.g. 10m; uses the ControlPath your ssh_config sets, if any).
    #[arg(long, value_name = "DUR", value_parser = parse_duration)]
    pub keep_connections: Option<Duration>,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// A runbook file, or a bare name: ./NAME.lua, ./runbooks/NAME.lua, then a shipped runbook.
    pub file: String,

    /// Set a param (repeatable).
    #[arg(long = "set", short = 'e', value_name = "KEY=VALUE", value_parser = parse_set)]
    pub sets: Vec<(String, String)>,

    /// Params from a TOML file of `KEY = VALUE` lines; --set and RUNBOOK_PARAM_* win over
    /// it. A secret param is refused from it unless the file is private (chmod 600).
    #[arg(long = "params", value_name = "FILE")]
    pub params: Option<PathBuf>,

    /// Preview: reads run for real, changes are shown, not made.
    #[arg(long)]
    pub dry_run: bool,

    /// With --dry-run: contact nothing at all (reads are planned too).
    #[arg(long, requires = "dry_run")]
    pub offline: bool,

    /// Skip the one confirmation before the first change: the plan (every change, not
    /// only deletions, and each step with confirm = true) is neither shown nor asked
    /// about, and the run is not held to a plan.
    #[arg(short = 'y', long)]
    pub yes: bool,

    /// NDJSON events on stdout instead of the terminal view.
    #[arg(long)]
    pub json: bool,

    /// Skip the steps that succeeded in an earlier run (a run id or `last`); a
    /// `rollout()` skips the items that succeeded.
    #[arg(long, value_name = "RUN|last")]
    pub resume: Option<String>,

    /// With --resume: run a rollout's items that failed again (by default they stay
    /// failed, and count against its budget).
    #[arg(long, requires = "resume")]
    pub retry_failed: bool,

    /// Save every command's target, command and result (secrets masked) to FILE, one JSON
    /// object a line, for `runbook test --replies FILE`.
    #[arg(long, value_name = "FILE", conflicts_with = "dry_run")]
    pub save_replies: Option<PathBuf>,

    #[command(flatten)]
    pub limits: RunLimits,

    /// Only these hosts of the inventory's groups (`targets("group")`): names, `*`/`?`
    /// wildcards, group names, `!TERM` to leave out, `&TERM` to keep only those also in
    /// it, separated by commas (`'gpu,!gpu07'`). A target named by `target()` is not
    /// affected. A limit that keeps no host is an error.
    #[arg(long, value_name = "PATTERN")]
    pub limit: Option<String>,

    #[command(flatten)]
    pub remote: RemoteArgs,
}

#[derive(Debug, Args)]
pub struct TestArgs {
    /// A runbook file, or a bare name: ./NAME.lua, ./runbooks/NAME.lua, then a shipped runbook.
    pub file: String,

    /// Set a param (repeatable).
    #[arg(long = "set", short = 'e', value_name = "KEY=VALUE", value_parser = parse_set)]
    pub sets: Vec<(String, String)>,

    /// Params from a TOML file of `KEY = VALUE` lines; --set and RUNBOOK_PARAM_* win over
    /// it. A secret param is refused from it unless the file is private (chmod 600).
    #[arg(long = "params", value_name = "FILE")]
    pub params: Option<PathBuf>,

    /// The replies to answer commands from (saved by `runbook run … --save-replies FILE`).
    #[arg(long, value_name = "R.jsonl")]
    pub replies: PathBuf,

    /// Fail (exit 3) when replies are left unused; by default they are a warning, as a
    /// failure path edited in stops before the later replies.
    #[arg(long)]
    pub strict: bool,

    /// NDJSON events on stdout instead of the terminal view.
    #[arg(long)]
    pub json: bool,

    /// Stop the whole run after this long (e.g. 30s; 0 means no timeout).
    #[arg(long, value_name = "DUR", value_parser = parse_timeout)]
    pub timeout: Option<Duration>,

    /// Names resolve as in the run that saved the replies (an inventory name is its target).
    #[command(flatten)]
    pub remote: RemoteArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PlanFormat {
    /// For a terminal.
    Text,
    /// Markdown, for a pull request or a ticket.
    Md,
    /// The plan file `runbook apply` reads.
    Json,
}

#[derive(Debug, Args)]
pub struct PlanArgs {
    /// A runbook file, or a bare name: ./NAME.lua, ./runbooks/NAME.lua, then a shipped
    /// runbook; or a saved plan (NAME.json) to show, e.g. as Markdown for a review.
    pub file: String,

    /// Set a param (repeatable).
    #[arg(long = "set", short = 'e', value_name = "KEY=VALUE", value_parser = parse_set)]
    pub sets: Vec<(String, String)>,

    /// Params from a TOML file of `KEY = VALUE` lines; --set and RUNBOOK_PARAM_* win over
    /// it. A secret param is refused from it unless the file is private (chmod 600).
    #[arg(long = "params", value_name = "FILE")]
    pub params: Option<PathBuf>,

    /// Write the plan to this file (default format: json, what `runbook apply` reads) instead of printing it.
    #[arg(short = 'o', long = "output", value_name = "PLAN.json")]
    pub output: Option<PathBuf>,

    /// text, md or json (default: text when printing, json with -o).
    #[arg(long, value_enum, value_name = "FORMAT")]
    pub format: Option<PlanFormat>,

    /// Contact nothing at all: reads are planned too, as with --dry-run --offline.
    #[arg(long)]
    pub offline: bool,

    /// Where run records and fingerprints are kept.
    #[arg(long, env = "RUNBOOK_STATE_DIR", value_name = "DIR")]
    pub state_dir: Option<PathBuf>,

    /// Stop making the plan after this long (e.g. 30m; 0 means no timeout).
    #[arg(long, value_name = "DUR", value_parser = parse_timeout)]
    pub timeout: Option<Duration>,

    /// With -o: sign the saved plan as its author (PLAN.approvals), with --key.
    #[arg(long, requires = "output")]
    pub sign: bool,

    #[command(flatten)]
    pub signing: SigningArgs,

    /// Only these hosts of the inventory's groups (`targets("group")`): names, `*`/`?`
    /// wildcards, group names, `!TERM` to leave out, `&TERM` to keep only those also in
    /// it, separated by commas (`'gpu,!gpu07'`). A target named by `target()` is not
    /// affected. A limit that keeps no host is an error. The plan records it.
    #[arg(long, value_name = "PATTERN")]
    pub limit: Option<String>,

    #[command(flatten)]
    pub remote: RemoteArgs,
}

/// The SSH key a plan is signed or approved with.
#[derive(Debug, Args, Clone, Default)]
pub struct SigningArgs {
    /// A private key file, or a public key (KEY.pub) whose private half an ssh-agent
    /// holds (default: ~/.ssh/id_ed25519).
    #[arg(long, value_name = "FILE", env = "RUNBOOK_SIGNING_KEY")]
    pub key: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct ApproveArgs {
    /// A plan saved with `runbook plan FILE -o PLAN.json --sign`.
    pub plan: PathBuf,

    /// How long the approval counts (default: the policy's ttl, else 24h).
    #[arg(long, value_name = "DUR", value_parser = parse_max_age)]
    pub ttl: Option<Duration>,

    /// Do not ask (refused when the targets no longer read as the plan says).
    #[arg(short = 'y', long)]
    pub yes: bool,

    #[command(flatten)]
    pub signing: SigningArgs,

    /// Where run records and fingerprints are kept.
    #[arg(long, env = "RUNBOOK_STATE_DIR", value_name = "DIR")]
    pub state_dir: Option<PathBuf>,

    /// Default: the inventory and ssh_config the plan was made with.
    #[command(flatten)]
    pub remote: RemoteArgs,
}

#[derive(Debug, Args)]
pub struct WatchArgs {
    /// The watch file (TOML): its triggers and what each proposes.
    pub file: PathBuf,

    /// Look at every trigger once, decide what waits for a decision (and apply what
    /// auto_apply allows and is approved), then exit: for cron, and tests.
    #[arg(long)]
    pub once: bool,

    /// Reject the proposal ID (its plan's file name without .json): the watcher closes
    /// it at its next look, and proposes again for its trigger after the cooldown.
    #[arg(long, value_name = "ID", conflicts_with_all = ["once", "list"])]
    pub reject: Option<String>,

    /// Why, with --reject (kept with the proposal).
    #[arg(long, value_name = "TEXT", requires = "reject")]
    pub reason: Option<String>,

    /// List the watcher's proposals (newest last) and exit.
    #[arg(long, conflicts_with = "once")]
    pub list: bool,

    /// Where the watcher's state, fingerprints and run records are kept.
    #[arg(long, env = "RUNBOOK_STATE_DIR", value_name = "DIR")]
    pub state_dir: Option<PathBuf>,

    /// With a [policy] in runbook.toml: the key the watcher signs its plans with, as
    /// their author (an allowed_signers principal of its own).
    #[command(flatten)]
    pub signing: SigningArgs,

    #[command(flatten)]
    pub remote: RemoteArgs,
}

#[derive(Debug, Args)]
pub struct ApplyArgs {
    /// A plan saved with `runbook plan FILE -o PLAN.json`.
    pub plan: PathBuf,

    /// Do not ask: the plan was reviewed.
    #[arg(short = 'y', long)]
    pub yes: bool,

    /// A param the plan cannot hold: a secret's value (or RUNBOOK_PARAM_<KEY>). Any other
    /// param that differs from the plan's is refused.
    #[arg(long = "set", short = 'e', value_name = "KEY=VALUE", value_parser = parse_set)]
    pub sets: Vec<(String, String)>,

    /// A params file (TOML), for the secrets the plan cannot hold (the file must be
    /// chmod 600 then); any other value in it must be the plan's, or apply is refused.
    #[arg(long = "params", value_name = "FILE")]
    pub params: Option<PathBuf>,

    /// Refuse a plan older than this (what it read may no longer hold). Default: 1h;
    /// under a policy (runbook.toml), none: its approvals expire instead.
    #[arg(long, value_name = "DUR", value_parser = parse_max_age)]
    pub max_age: Option<Duration>,

    /// NDJSON events on stdout instead of the terminal view.
    #[arg(long)]
    pub json: bool,

    #[command(flatten)]
    pub limits: RunLimits,

    /// The plan's own `--limit` (the default); another is refused: the plan was made for
    /// the hosts it kept.
    #[arg(long, value_name = "PATTERN")]
    pub limit: Option<String>,

    /// Default: the inventory and ssh_config the plan was made with.
    #[command(flatten)]
    pub remote: RemoteArgs,
}

/// How to reach machines: shared by `run`, `check` and `show`.
#[derive(Debug, Args, Clone, Default)]
pub struct RemoteArgs {
    /// Inventory of named hosts and groups (default: ./inventory.toml when present).
    #[arg(long, value_name = "FILE", env = "RUNBOOK_INVENTORY")]
    pub inventory: Option<PathBuf>,

    /// Use this ssh_config instead of ~/.ssh/config.
    #[arg(long, value_name = "FILE")]
    pub ssh_config: Option<PathBuf>,

    /// Accept the host key of a host never seen before (a changed key still fails).
    #[arg(long)]
    pub trust_new_hosts: bool,
}

fn parse_set(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.to_string())),
        _ => Err(format!("expected KEY=VALUE, got '{s}'")),
    }
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    duration::parse(s)
}

fn parse_max_age(s: &str) -> Result<Duration, String> {
    match duration::parse(s)? {
        d if d.is_zero() => {
            Err("must be more than 0 (a plan is only as good as what it read)".into())
        }
        d => Ok(d),
    }
}

fn parse_timeout(s: &str) -> Result<Duration, String> {
    duration::parse(s).map_err(|e| format!("{e}{}", duration::NO_TIMEOUT_HINT))
}

/// `--since`: a duration back from now, or a UTC date (midnight) or time.
fn parse_since(s: &str) -> Result<std::time::SystemTime, String> {
    let now = std::time::SystemTime::now();
    if let Ok(d) = duration::parse(s) {
        return now
            .checked_sub(d)
            .ok_or_else(|| format!("{s} goes back before 1970"));
    }
    let time = if s.len() == 10 {
        format!("{s}T00:00:00Z")
    } else {
        s.to_string()
    };
    humantime::parse_rfc3339_weak(&time).map_err(|_| {
        format!(
            "'{s}' is neither a duration (2h, 7d) nor a UTC date or time (2026-12-01, 2026-12-01T09:30:00Z)"
        )
    })
}
