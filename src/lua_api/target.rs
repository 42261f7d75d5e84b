//! `target()` and target handles: `t:exec(argv, opts)`, `t:shell(script, opts)`.

use super::options::{self, Whole};
use super::{ctx, err_at, location, require_running, string_value, word_list};
use crate::actions::perform::Effect;
use crate::base::classify::{self, Class};
use crate::primitives::{Cmd, Ran, Step};
use crate::targets::registry::expand_home;
use crate::targets::ssh::SshSpec;
use crate::targets::{Container, ExecRequest, Target};
use mlua::{Lua, Table, UserData, UserDataMethods, UserDataRef, Value};
use serde::Deserialize;
use std::ffi::OsString;
use std::rc::Rc;
use std::time::Duration;

/// Options of `t:exec` and `t:shell`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommandOptions {
    /// `check` (default true): a non-zero exit fails the step; with `false`, look at
    /// `ok`/`code`;
    #[serde(default = "options::yes")]
    check: bool,
    /// `timeout` (duration): stops the command and its whole process tree; 0 (in any
    /// spelling) means no timeout of its own (the step's still applies). It counts from
    /// when the command starts, not from when it was queued for a free slot;
    #[serde(default, deserialize_with = "options::timeout")]
    timeout: Option<Duration>,
    /// `env` (table of `NAME = "value"`): variables for the command;
    #[serde(default, deserialize_with = "options::env")]
    env: Vec<(String, OsString)>,
    /// `cwd` (string): the directory it runs in;
    cwd: Option<String>,
    /// `stdin` (string): what it reads on standard input, byte for byte;
    #[serde(default, deserialize_with = "options::bytes")]
    stdin: Option<Vec<u8>>,
    /// `read_only = true`: declares that it only looks, so it also runs during `--dry-run`;
    /// refused (an error at the call, in every mode) for a command that deletes or may
    /// delete as runbook reads it (see `destructive`);
    #[serde(default)]
    read_only: bool,
    /// `destructive`: whether it deletes/overwrites, marked `[deletes]` in previews and
    /// plans. Read from the argv when absent, through the wrappers (`sudo`, `env`,
    /// `timeout`, `xargs`, `sh -c SCRIPT`, …): `rm`, `find -delete`, `git clean`,
    /// `rsync --delete`, `dd of=` delete; `mv`, `tee FILE`, a `>` onto a file, and a
    /// shell script runbook cannot read whole (a variable or `$(…)` as the command,
    /// `eval`, `. FILE`, `sh` reading a file or standard input) are marked `[may delete]`.
    /// `true` marks it `[deletes]`; `false` cannot hide what runbook read: a command it
    /// reads as deleting is shown as `[may delete]`;
    destructive: Option<bool>,
    /// `summary`: a one-line description for previews and records (default: the command);
    summary: Option<String>,
    /// `secret_output = true`: the command prints a secret (a token it mints or reads):
    /// its output shows as `***` in every sink while it runs, and its stdout is a secret
    /// from then on, like `secret()`.
    #[serde(default)]
    secret_output: bool,
    /// `detach = true`: the command outlives the connection: it runs on the target under
    /// a supervisor (its own process group, output and exit status in files in
    /// runbook's 0700 directory there) and runbook follows it; when the connection
    /// drops (sshd restarted, a network blip, a laptop asleep) runbook reconnects, goes
    /// on from the last byte it read and collects the status: the step neither fails nor
    /// runs the command twice. A runbook killed outright reattaches with `--resume`.
    /// Default: true when `timeout` is over 5 minutes, else false. Timeouts and Ctrl-C
    /// still stop its whole process tree;
    detach: Option<bool>,
}

/// A target as runbooks hold it, with its inventory `vars` (empty for any other).
pub struct TargetHandle(pub Rc<Target>, pub Rc<toml::Table>);

impl TargetHandle {
    /// A target that is no inventory host: no `vars`.
    pub fn new(target: Rc<Target>) -> Self {
        TargetHandle(target, Rc::default())
    }
}

impl UserData for TargetHandle {
    fn add_fields<F: mlua::UserDataFields<Self>>(fields: &mut F) {
        fields.add_field_method_get("name", |_, this| Ok(this.0.name()));
        // A fresh copy at each read: the inventory's values, whatever a runbook does
        // with the table.
        fields.add_field_method_get("vars", |lua, this| super::to_lua(lua, &*this.1));
    }

    fn add_methods<M: UserDataMethods<Self>>(methods: &mut M) {
        methods.add_meta_method("__tostring", |_, this, ()| {
            Ok(format!("target({})", this.0.name()))
        });
        methods.add_method("pct", |lua, this, ctid: Value| pct(lua, this, ctid));
        methods.add_method("lxc", |lua, this, (name, opts): (Value, Option<Table>)| {
            lxc(lua, this, name, opts)
        });
        methods.add_method(
            "docker",
            |lua, this, (name, opts): (Value, Option<Table>)| docker(lua, this, name, opts),
        );
        methods.add_method(
            "podman",
            |lua, this, (name, opts): (Value, Option<Table>)| podman(lua, this, name, opts),
        );
        methods.add_method("kube", |lua, this, (pod, opts): (Value, Option<Table>)| {
            kube(lua, this, pod, opts)
        });
        methods.add_async_method(
            "exec",
            |lua, this: UserDataRef<Self>, (argv, opts): (Value, Option<Table>)| {
                let target = this.0.clone();
                drop(this);
                super::freed_when_done(exec(lua, target, argv, opts))
            },
        );
        methods.add_async_method(
            "shell",
            |lua, this: UserDataRef<Self>, (script, opts): (Value, Option<Table>)| {
                let target = this.0.clone();
                drop(this);
                super::freed_when_done(shell(lua, target, script, opts))
            },
        );
    }
}

pub fn register(lua: &Lua) -> mlua::Result<()> {
    let g = lua.globals();
    g.raw_set("target", lua.create_function(target)?)?;
    g.raw_set("ssh", lua.create_function(ssh)?)
}

/// Lua: target(name) -> target
///
/// A handle on a machine to run things on. `name` is `"local"` (this machine),
/// `"user@host"`, `"user@host:port"`, `"ssh://user@host:port"`, a host name from the
/// inventory (`inventory.toml` or `--inventory`), which may be a container on another
/// host, or any name ssh takes: one a `Host` line of your ssh config (or `--ssh-config`)
/// takes, its wildcard patterns (`Host gpu*`) included, else a plain host name
/// (`"gpu01"`, `"gpu01.cluster.example"`) for the resolver. Looked up in that order.
/// Making a handle contacts nothing: the first command on an SSH host opens its one
/// connection for the run; when that fails, the message says where the name came from
/// (`gpu01x is a plain host name: in neither the inventory … nor a Host of …; did you
/// mean 'gpu01'?`).
/// `t.name` is the name messages give it (`node1/ct200` for a container on `node1`).
/// `t.vars` is the host's `vars = { … }` from the inventory (a copy; an empty table for a
/// target that is no inventory host, a container made with `:pct()` on one included).
///
/// ```lua
/// local here = target("local")
/// local node = target("root@gpu-node-1.example")
/// local trainer = target("trainer")   -- from inventory.toml
/// log.info("CUDA " .. tostring(trainer.vars.cuda))
/// ```
/// ---@param name string
/// ---@return runbook.Target
/// ---@class runbook.Target
/// ---@field name string the name messages give it (`node1/ct200` for a container on `node1`)
/// ---@field vars table<string, any> the host's `vars` from the inventory (empty for any other target)
fn target(lua: &Lua, name: Value) -> mlua::Result<TargetHandle> {
    let Some(name) = string_value(lua, name, "target()")? else {
        return Err(err_at(
            lua,
            "target(): give a target name, e.g. target(\"local\") or target(\"root@node.example\")",
        ));
    };
    let targets = &ctx(lua).targets;
    let resolved = targets
        .resolve(&name)
        .map_err(|e| err_at(lua, format!("target(\"{name}\"): {e}")))?;
    let vars = targets.vars(&name).unwrap_or_default();
    Ok(TargetHandle(resolved, Rc::new(vars)))
}

/// Options of `ssh`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SshOptions {
    /// `user`: the user to log in as;
    user: Option<String>,
    /// `port` (a whole number from 1 to 65535): the port sshd listens on;
    port: Option<Whole<1, 65535>>,
    /// `identity`: a key file (`~/` works);
    identity: Option<String>,
    /// `jump`: a bastion to go through, like `ssh -J`;
    jump: Option<String>,
    /// `connect_timeout` (default `"10s"`; unlike other timeouts it cannot be 0): how long
    /// connecting may take.
    #[serde(default, deserialize_with = "options::duration")]
    connect_timeout: Option<Duration>,
}

/// Lua: ssh(host, [opts]) -> target
///
/// An SSH target with explicit options; your ssh config still applies to anything these
/// do not set. Options ([`SshOptions`]):
///
/// ```lua
/// local node2 = ssh("gpu-node-2.example", { user = "root", port = 22,
///                                           identity = "~/.ssh/id_ed25519",
///                                           jump = "bastion.example", connect_timeout = "10s" })
/// ```
/// ---@param host string
/// ---@param opts? runbook.TargetSshOptions
/// ---@return runbook.Target
fn ssh(lua: &Lua, (host, opts): (Value, Option<Table>)) -> mlua::Result<TargetHandle> {
    let Some(host) = string_value(lua, host, "ssh()")? else {
        return Err(err_at(
            lua,
            "ssh(): give a host, e.g. ssh(\"node.example\", { user = \"root\" })",
        ));
    };
    let mut spec = SshSpec::parse(&host).map_err(|e| err_at(lua, format!("ssh(): {e}")))?;
    let o: SshOptions = options::read(lua, "ssh()", opts)?;
    if let Some(u) = o.user {
        spec.user = Some(u);
    }
    if let Some(p) = o.port {
        spec.port = Some(p.0 as u16);
    }
    spec.identity = o.identity.map(|p| expand_home(&p));
    spec.jump = o.jump;
    if let Some(d) = o.connect_timeout {
        // Connecting must end by itself: a hung handshake has nothing else to stop it.
        if d.is_zero() {
            return Err(err_at(
                lua,
                "ssh(): connect_timeout must be more than 0 (the default is \"10s\")",
            ));
        }
        spec.connect_timeout = d;
    }
    Ok(TargetHandle::new(ctx(lua).targets.ssh(spec)))
}

/// Lua: t:pct(ctid) -> target
///
/// The Proxmox LXC container `ctid` on `t`: every command becomes
/// `pct exec CTID -- argv…` on `t`, with the argv kept word for word. Works on any
/// target, `target("local"):pct(200)` included (runbook running on the node itself).
///
/// ```lua
/// local box = target("root@pve1.example"):pct(200)
/// box:exec({ "nvidia-smi", "-L" })
/// ```
/// ---@param ctid integer|string
/// ---@return runbook.Target
fn pct(lua: &Lua, this: &TargetHandle, ctid: Value) -> mlua::Result<TargetHandle> {
    let parsed = match &ctid {
        Value::Integer(n) => u32::try_from(*n).ok(),
        // `200.0` is 200, as for every whole number a runbook gives; the range check makes
        // the cast exact.
        Value::Number(f) if f.fract() == 0.0 && (0.0..=f64::from(u32::MAX)).contains(f) => {
            Some(*f as u32)
        }
        Value::String(s) => s.to_string_lossy().parse::<u32>().ok(),
        _ => None,
    };
    let Some(ctid) = parsed.filter(|n| (100..=999_999_999).contains(n)) else {
        return Err(err_at(
            lua,
            "pct(): a container id is a number from 100 to 999999999",
        ));
    };
    Ok(inside(this, Container::Pct(ctid)))
}

fn inside(this: &TargetHandle, ct: Container) -> TargetHandle {
    TargetHandle::new(Rc::new(Target::In {
        parent: this.0.clone(),
        ct,
        label: None,
    }))
}

/// The name a container method was given: a string, or a clear error at the line.
fn container_name(lua: &Lua, v: Value, what: &str, example: &str) -> mlua::Result<String> {
    match v {
        Value::String(s) => Ok(s.to_string_lossy()),
        other => Err(err_at(
            lua,
            format!(
                "{what}: give the name as a string, e.g. {example}; got {}",
                other.type_name()
            ),
        )),
    }
}

/// Options of `t:lxc`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LxcOptions {
    /// `keep_env = true`: `--keep-env` instead (the old LXC default, and Proxmox VE 8's).
    #[serde(default)]
    keep_env: bool,
}

/// Lua: t:lxc(name, [opts]) -> target
///
/// The LXC container `name` on `t` (LXC without Proxmox): every command becomes
/// `lxc-attach -n NAME --clear-env -- argv…` on `t`, with the argv kept word for word.
/// `--clear-env`: a command sees the container's own environment (`PATH` and
/// `container=lxc`) plus its `env`, never that of whoever ran runbook.
/// Options ([`LxcOptions`]):
///
/// ```lua
/// local web = target("root@host.example"):lxc("web")
/// web:exec({ "nginx", "-t" }, { read_only = true })
/// ```
/// ---@param name string
/// ---@param opts? runbook.TargetLxcOptions
/// ---@return runbook.Target
fn lxc(
    lua: &Lua,
    this: &TargetHandle,
    name: Value,
    opts: Option<Table>,
) -> mlua::Result<TargetHandle> {
    let name = container_name(lua, name, "lxc()", "t:lxc(\"web\")")?;
    let o: LxcOptions = options::read(lua, "lxc()", opts)?;
    let ct = Container::lxc(&name, o.keep_env).map_err(|e| err_at(lua, format!("lxc(): {e}")))?;
    Ok(inside(this, ct))
}

/// Options of `t:docker` and `t:podman`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EngineOptions {
    /// `user` (`-u`: a name, uid, `name:group` or `uid:gid`; default: the image's user):
    /// who commands run as.
    user: Option<String>,
}

/// Lua: t:docker(name, [opts]) -> target
///
/// The Docker container `name` (or id) on `t`: every command becomes
/// `docker exec -i [-u USER] NAME argv…` on `t`, so `target("root@h.example"):docker("trainer")`
/// runs `ssh … docker exec -i trainer …`. Options ([`EngineOptions`]):
///
/// The container needs `sh` and `setsid` (every command runs through them, so that a
/// timeout or Ctrl-C stops its whole tree inside the container). `env` values travel on
/// standard input, never as `-e` (an argv, and `-e NAME` would read the value on the
/// host running docker); `cwd` is a `cd` inside the container. Docker carries a command's
/// words as JSON, which holds only UTF-8: words that are not UTF-8 are armoured and
/// decoded inside the container, so they still arrive byte for byte. A missing, stopped
/// or paused container fails the step saying so, even with `check = false`.
///
/// ```lua
/// local trainer = target("root@gpu-node-1.example"):docker("trainer", { user = "app" })
/// trainer:exec({ "python3", "-c", "import torch; print(torch.__version__)" }, { read_only = true })
/// ```
/// ---@param name string
/// ---@param opts? runbook.TargetEngineOptions
/// ---@return runbook.Target
fn docker(
    lua: &Lua,
    this: &TargetHandle,
    name: Value,
    opts: Option<Table>,
) -> mlua::Result<TargetHandle> {
    engine(lua, this, false, name, opts)
}

/// Lua: t:podman(name, [opts]) -> target
///
/// The Podman container `name` (or id) on `t`: `podman exec -i [-u USER] NAME argv…`,
/// otherwise exactly as `t:docker`. Podman's containers are per user: root's are not
/// another user's on the same host.
///
/// ```lua
/// local db = target("local"):podman("db")
/// db:exec({ "pg_isready" }, { read_only = true })
/// ```
/// ---@param name string
/// ---@param opts? runbook.TargetEngineOptions
/// ---@return runbook.Target
fn podman(
    lua: &Lua,
    this: &TargetHandle,
    name: Value,
    opts: Option<Table>,
) -> mlua::Result<TargetHandle> {
    engine(lua, this, true, name, opts)
}

fn engine(
    lua: &Lua,
    this: &TargetHandle,
    podman: bool,
    name: Value,
    opts: Option<Table>,
) -> mlua::Result<TargetHandle> {
    let what = if podman { "podman()" } else { "docker()" };
    let example = if podman {
        "t:podman(\"trainer\")"
    } else {
        "t:docker(\"trainer\")"
    };
    let name = container_name(lua, name, what, example)?;
    let o: EngineOptions = options::read(lua, what, opts)?;
    let ct = Container::engine(podman, &name, o.user.as_deref())
        .map_err(|e| err_at(lua, format!("{what}: {e}")))?;
    Ok(inside(this, ct))
}

/// Options of `t:kube`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KubeOptions {
    /// `container` (default: the pod's default container, which kubectl names on stderr
    /// when the pod has several);
    container: Option<String>,
    /// `namespace` (default: the context's);
    namespace: Option<String>,
    /// `context` (a kubeconfig context; default: the current one).
    context: Option<String>,
}

/// Lua: t:kube(pod, [opts]) -> target
///
/// The pod `pod` as reached from `t` with `kubectl exec`: every command becomes
/// `kubectl exec -i [--context=CONTEXT] [--namespace=NS] [--container=C] POD -- argv…` on
/// `t`. Options ([`KubeOptions`]):
///
/// As with `t:docker`: the container needs `sh` and `setsid`, `env` values travel on
/// standard input, words that are not UTF-8 arrive intact. The command's exit code is
/// its own (kubectl adds `command terminated with exit code N` to stderr when it is not
/// 0). A missing pod or container, or one that is not running, fails the step saying
/// so.
///
/// ```lua
/// local worker = target("local"):kube("trainer-0", { namespace = "ml", container = "main" })
/// worker:exec({ "nvidia-smi", "-L" }, { read_only = true })
/// ```
/// ---@param pod string
/// ---@param opts? runbook.TargetKubeOptions
/// ---@return runbook.Target
fn kube(
    lua: &Lua,
    this: &TargetHandle,
    pod: Value,
    opts: Option<Table>,
) -> mlua::Result<TargetHandle> {
    let pod = container_name(lua, pod, "kube()", "t:kube(\"trainer-0\")")?;
    let o: KubeOptions = options::read(lua, "kube()", opts)?;
    let ct = Container::kube(
        &pod,
        o.container.as_deref(),
        o.namespace.as_deref(),
        o.context.as_deref(),
    )
    .map_err(|e| err_at(lua, format!("kube(): {e}")))?;
    Ok(inside(this, ct))
}

struct ExecOptions {
    check: bool,
    detach: Option<bool>,
    read_only: bool,
    destructive: Option<bool>,
    /// What previews say instead of the command line (which they still show).
    summary: Option<String>,
    req: ExecRequest,
}

fn parse_options(lua: &Lua, opts: Option<Table>, what: &str) -> mlua::Result<ExecOptions> {
    let o: CommandOptions = options::read(lua, what, opts)?;
    Ok(ExecOptions {
        check: o.check,
        detach: o.detach,
        read_only: o.read_only,
        destructive: o.destructive,
        summary: o.summary,
        req: ExecRequest {
            timeout: o.timeout,
            cwd: o.cwd,
            stdin: o.stdin,
            env: o.env,
            secret_output: o.secret_output,
            ..ExecRequest::default()
        },
    })
}

/// An argv from a Lua list of strings (numbers are accepted and converted).
fn argv_from(lua: &Lua, v: Value) -> mlua::Result<Vec<OsString>> {
    let Value::Table(t) = v else {
        let hint = if matches!(v, Value::String(_)) {
            " (to run a shell command line, use t:shell(\"…\"))"
        } else {
            ""
        };
        return Err(err_at(
            lua,
            format!(
                "exec: the command is a list of words like {{ \"ls\", \"-l\" }}, got {}{hint}",
                v.type_name()
            ),
        ));
    };
    let argv = word_list(lua, &t, "exec: argv")?;
    crate::base::quote::validate_argv(&argv).map_err(|e| err_at(lua, format!("exec: {e}")))?;
    Ok(argv)
}

/// Lua: t:exec(argv, [opts]) -> { ok, code, stdout, stderr, duration, timed_out, planned }
///
/// Runs a program with its arguments, no shell involved: each list item reaches the
/// program as one argument, byte for byte. Options ([`CommandOptions`]):
///
/// `env` values never pass through an argv on any hop (they reach remote commands on
/// standard input through a small wrapper), so that is the way to hand a command a
/// secret; a secret inside the argv itself is warned about, since every user of that
/// machine can read an argv.
///
/// During `--dry-run` a command that is not read-only does not run: the result has
/// `planned = true`, `ok = true`, an empty `stderr`, and as `stdout` a placeholder for what
/// it will print (one word, kept whole by trimming). A later change that uses it (`mktemp
/// -d`, then `touch DIR/file`) is shown and planned with `(known after apply)` there, and
/// the real run lets only what that change printed stand in that place. A read whose
/// command holds a placeholder does not run in the dry-run (it is planned).
///
/// ```lua
/// here:exec({ "mkdir", "-p", params.dir })
/// -- A read runs in a dry-run too, where the mkdir was only planned: `check = false`.
/// local r = here:exec({ "ls", params.dir }, { read_only = true, check = false })
/// local probe = here:exec({ "test", "-e", "/etc/hosts" }, { check = false, read_only = true })
/// if probe.code ~= 0 then fail("no /etc/hosts") end
/// ```
/// ---@param argv runbook.Words
/// ---@param opts? runbook.TargetCommandOptions
/// ---@return runbook.ExecResult
/// ---@class runbook.ExecResult
/// ---@field ok boolean it exited 0
/// ---@field code? integer its exit code (nil when a signal ended it)
/// ---@field stdout string
/// ---@field stderr string
/// ---@field duration number seconds
/// ---@field timed_out? boolean its timeout stopped it
/// ---@field truncated? boolean its output was too long to keep whole
/// ---@field planned boolean a dry-run: it did not run
async fn exec(
    lua: Lua,
    target: Rc<Target>,
    argv: Value,
    opts: Option<Table>,
) -> mlua::Result<Table> {
    let ctx = require_running(&lua, "exec()")?;
    let loc = location(&lua);
    let argv = argv_from(&lua, argv)?;
    let mut o = parse_options(&lua, opts, "exec")?;
    let line = crate::base::quote::join(&argv);
    let read = classify::argv(&argv).max(env_class(&o));
    let class = class_of(&lua, &o, read, "exec", &line)?;
    o.req.argv = argv;
    let summary = o.summary.clone().unwrap_or(line);
    run(&lua, &ctx, &target, o, summary, class, loc).await
}

/// Lua: t:shell(script, [opts]) -> { ok, code, stdout, stderr, duration, timed_out, planned }
///
/// Runs `script` with `sh -c`, for when shell features (pipes, `&&`, globs) are the point.
/// Takes the same options as `exec`. Prefer `exec` for anything that takes user input:
/// an argv needs no quoting.
///
/// ```lua
/// here:shell("ls /tmp | wc -l", { read_only = true })
/// ```
/// ---@param script string
/// ---@param opts? runbook.TargetCommandOptions
/// ---@return runbook.ExecResult
async fn shell(
    lua: Lua,
    target: Rc<Target>,
    script: Value,
    opts: Option<Table>,
) -> mlua::Result<Table> {
    let ctx = require_running(&lua, "shell()")?;
    let loc = location(&lua);
    let Some(script) = string_value(&lua, script, "shell")? else {
        return Err(err_at(
            &lua,
            "shell: give the script as a string, e.g. t:shell(\"ls | wc -l\")",
        ));
    };
    let mut o = parse_options(&lua, opts, "shell")?;
    o.req.argv = vec!["sh".into(), "-c".into(), script.clone().into()];
    let read = classify::argv(&o.req.argv).max(env_class(&o));
    let class = class_of(&lua, &o, read, "shell", &script)?;
    let first = script.lines().next().unwrap_or_default();
    let summary = match (o.summary.clone(), script.lines().nth(1).is_some()) {
        (Some(s), _) => s,
        (None, true) => format!("sh -c: {first} …"),
        (None, false) => format!("sh -c: {first}"),
    };
    run(&lua, &ctx, &target, o, summary, class, loc).await
}

/// The class of the command's own `env`: a variable that makes the program run other
/// code (`BASH_ENV`, `BASH_FUNC_x%%`, `LD_PRELOAD`, `PATH`, …) may delete.
fn env_class(o: &ExecOptions) -> Class {
    classify::env_vars(o.req.env.iter().map(|(name, _)| name.as_str()))
}

/// The class a command is shown with: runbook's reading of it (`base/classify/`), or
/// `destructive` where the runbook gave it. `destructive = false` lowers "deletes" to
/// "may delete", never to safe: what runbook read stays on show. A read of any class but
/// safe is refused here, at the call, in every mode: a read runs during `--dry-run`, and
/// a read that deletes would delete in the preview. (`destructive = false` does not make
/// one a read: runbook's reading is what is refused.)
fn class_of(
    lua: &Lua,
    o: &ExecOptions,
    read: Class,
    what: &str,
    command: &str,
) -> mlua::Result<Class> {
    let class = match (o.destructive, read) {
        (Some(true), _) => Class::Deletes,
        (Some(false), Class::Safe) => Class::Safe,
        (Some(false), _) => Class::MayDelete,
        (None, c) => c,
    };
    if o.read_only && (read != Class::Safe || class != Class::Safe) {
        let why = match read {
            Class::Deletes => "deletes or overwrites something (as runbook reads its words, through sudo, env, sh -c and other wrappers)",
            Class::MayDelete => "may delete: runbook cannot read all that it runs (a variable or $(…) as a command, eval, a sourced file, sh on a file or standard input, interpreter code that calls out, an environment variable such as BASH_ENV, PATH or LD_PRELOAD) or it may overwrite a file (mv, cp, tee, >)",
            Class::Safe => "is declared destructive = true",
        };
        return Err(err_at(
            lua,
            format!(
                "{what}: read_only = true on a command that {why}: a read runs during --dry-run too, so it must not delete; drop read_only (a change: previewed, confirmed) or make it only look: `{command}`"
            ),
        ));
    }
    Ok(class)
}

async fn run(
    lua: &Lua,
    ctx: &crate::actions::ctx::Ctx,
    target: &Target,
    o: ExecOptions,
    summary: String,
    class: Class,
    loc: String,
) -> mlua::Result<Table> {
    let effect = if o.read_only {
        Effect::Read
    } else {
        Effect::Change
    };
    let timeout = o.req.timeout;
    let detach = o.detach;
    let ExecRequest {
        argv,
        env,
        cwd,
        stdin,
        secret_output,
        ..
    } = o.req;
    let cmd = Cmd {
        argv,
        env,
        cwd,
        stdin,
        timeout,
        script: None,
        secret_output,
        binary_output: false,
        stdin_data: false,
        diff: None,
        detach,
    };
    let step = Step {
        ctx,
        target,
        at: loc,
    };
    let ran = step.run(cmd, summary, effect, class).await?;
    let ok = ran.ok();
    let result = lua.create_table()?;
    // As the preview showed it (the env/cwd wrappers of a remote hop not spelt out).
    let (out, command) = match ran {
        Ran::Planned { known_after } => {
            result.raw_set("ok", true)?;
            result.raw_set("code", 0)?;
            // A change's output is not known before it runs: a placeholder stands for it,
            // and a later change that uses it is planned with `(known after apply)` there.
            result.raw_set("stdout", known_after.unwrap_or_default())?;
            result.raw_set("stderr", "")?;
            result.raw_set("duration", 0.0)?;
            result.raw_set("planned", true)?;
            return Ok(result);
        }
        Ran::Done { out, shown } => (out, shown),
    };
    result.raw_set("ok", ok)?;
    result.raw_set("code", out.code)?;
    result.raw_set("stdout", lua.create_string(&out.stdout)?)?;
    result.raw_set("stderr", lua.create_string(&out.stderr)?)?;
    result.raw_set("duration", out.duration.as_secs_f64())?;
    result.raw_set("timed_out", out.timed_out)?;
    result.raw_set("planned", false)?;
    if out.stdout_truncated || out.stderr_truncated {
        result.raw_set("truncated", true)?;
    }
    if !ok && o.check {
        let head = out.failed("command", Some(&target.name()), timeout);
        // With `secret_output`, stderr may hold the secret as well (only stdout is
        // registered as one): its tail is not shown.
        let tail = if o.req.secret_output {
            String::new()
        } else {
            out.stderr_tail(crate::targets::failure::TAIL_LINES)
        };
        return Err(step.fail(format!("{head}: {command}{tail}")).into());
    }
    Ok(result)
}

/// The target a primitive was given as its first argument (`cache.clear(t, …)`).
pub fn target_arg(lua: &Lua, v: &Value, what: &str) -> mlua::Result<Rc<Target>> {
    if let Value::UserData(ud) = v {
        if let Ok(t) = ud.borrow::<TargetHandle>() {
            return Ok(t.0.clone());
        }
    }
    Err(err_at(
        lua,
        format!(
            "{what}: the first argument is a target, e.g. {what}(target(\"local\"), …); got {}",
            v.type_name()
        ),
    ))
}

/// The methods and fields a target handle registers (`t:exec`, `t.name`, …), read from its
/// `UserData` impl without a VM: what `runbook docs --globals` lists and the typo check
/// knows a handle by.
pub fn handle_api() -> (
    std::collections::BTreeSet<String>,
    std::collections::BTreeSet<String>,
) {
    use mlua::UserData;
    let mut r = Registered::default();
    TargetHandle::add_fields(&mut r);
    TargetHandle::add_methods(&mut r);
    (r.methods, r.fields)
}

/// The names a `UserData` impl registers (its methods and fields), without a VM.
#[derive(Default)]
struct Registered {
    methods: std::collections::BTreeSet<String>,
    fields: std::collections::BTreeSet<String>,
}

/// Every `add_*` records the name and drops the callback; meta methods (`__tostring`)
/// are not part of the API.
impl<T> mlua::UserDataMethods<T> for Registered {
    fn add_method<M, A, R>(&mut self, name: impl Into<String>, _: M) {
        self.methods.insert(name.into());
    }
    fn add_method_mut<M, A, R>(&mut self, name: impl Into<String>, _: M) {
        self.methods.insert(name.into());
    }
    fn add_async_method<M, A, MR, R>(&mut self, name: impl Into<String>, _: M) {
        self.methods.insert(name.into());
    }
    fn add_async_method_mut<M, A, MR, R>(&mut self, name: impl Into<String>, _: M) {
        self.methods.insert(name.into());
    }
    fn add_function<F, A, R>(&mut self, name: impl Into<String>, _: F) {
        self.methods.insert(name.into());
    }
    fn add_function_mut<F, A, R>(&mut self, name: impl Into<String>, _: F) {
        self.methods.insert(name.into());
    }
    fn add_async_function<F, A, FR, R>(&mut self, name: impl Into<String>, _: F) {
        self.methods.insert(name.into());
    }
    fn add_meta_method<M, A, R>(&mut self, _: impl Into<String>, _: M) {}
    fn add_meta_method_mut<M, A, R>(&mut self, _: impl Into<String>, _: M) {}
    fn add_async_meta_method<M, A, MR, R>(&mut self, _: impl Into<String>, _: M) {}
    fn add_async_meta_method_mut<M, A, MR, R>(&mut self, _: impl Into<String>, _: M) {}
    fn add_meta_function<F, A, R>(&mut self, _: impl Into<String>, _: F) {}
    fn add_meta_function_mut<F, A, R>(&mut self, _: impl Into<String>, _: F) {}
    fn add_async_meta_function<F, A, FR, R>(&mut self, _: impl Into<String>, _: F) {}
}

impl<T> mlua::UserDataFields<T> for Registered {
    fn add_field<V>(&mut self, name: impl Into<String>, _: V) {
        self.fields.insert(name.into());
    }
    fn add_field_method_get<M, R>(&mut self, name: impl Into<String>, _: M) {
        self.fields.insert(name.into());
    }
    fn add_field_method_set<M, A>(&mut self, name: impl Into<String>, _: M) {
        self.fields.insert(name.into());
    }
    fn add_field_function_get<F, R>(&mut self, name: impl Into<String>, _: F) {
        self.fields.insert(name.into());
    }
    fn add_field_function_set<F, A>(&mut self, name: impl Into<String>, _: F) {
        self.fields.insert(name.into());
    }
    fn add_meta_field<V>(&mut self, _: impl Into<String>, _: V) {}
    fn add_meta_field_with<F, R>(&mut self, _: impl Into<String>, _: F) {}
}
