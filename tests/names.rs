//! Names as users type them (issue 33 item 3): `target(NAME)` takes any name ssh itself
//! would take (a Host of the ssh_config, its wildcard patterns included, or a plain host
//! name for the resolver), and a host that cannot be reached says where its name came
//! from: the inventory, an ssh_config Host, or a plain host name (with the closest known
//! name). `list` and `show` take `--ssh-config`, so a runbook naming a Host of another
//! config is not "(invalid)".
use crate::common::lxc::{self, Kind};
use crate::common::sshd::Fleet;
use crate::common::*;

/// The fleet's ssh_config with `Host rack-* …` in front, reaching node1 (and its real
/// containers through `pct`).
fn with_pattern(env: &Env, fleet: &Fleet) -> std::path::PathBuf {
    let port = fleet.nodes[0].port;
    let rest = std::fs::read_to_string(fleet.ssh_config()).unwrap();
    env.write(
        "ssh_config",
        &format!("Host rack-*\n  HostName 127.0.0.1\n  Port {port}\n  User root\n{rest}"),
    )
}

#[test]
fn a_host_pattern_of_the_ssh_config_and_a_real_container_behind_it() {
    require_sshd!();
    let Some(ct) = lxc::container(Kind::Busybox) else {
        return;
    };
    let fleet = Fleet::start_with_real_lxc(1);
    let env = Env::new();
    let config = with_pattern(&env, &fleet);
    let rb = env.write(
        "rack.lua",
        &subst(
            r#"runbook { name = "rack" }
local node = target("rack-07")
step("look", function()
  local r = node:pct(@vmid@):exec({ "cat", "/proc/sys/kernel/hostname" }, { read_only = true })
  log.info("ct=" .. r.stdout)
  node:exec({ "true" }, { read_only = true })
  log.info("name=" .. node.name)
end)
"#,
            &[("vmid", &ct.vmid)],
        ),
    );
    let out = Run::new(&env, &rb)
        .arg("--ssh-config")
        .arg(&config)
        .yes()
        .json()
        .run();
    out.assert_exit(0);
    assert_eq!(
        out.logs(),
        [format!("ct={}", ct.vmid), "name=rack-07".to_string()],
        "{}",
        out.describe()
    );
}

/// A plain host name is taken as ssh takes it, nothing contacted to make the handle; a
/// host that cannot be reached says where each name came from.
#[test]
fn where_a_name_came_from_is_said_when_its_host_cannot_be_reached() {
    require_sshd!();
    let mut fleet = Fleet::start(1);
    fleet.node("node1").kill();
    let env = Env::new();
    let config = with_pattern(&env, &fleet);
    let inventory = env.write(
        "inventory.toml",
        "[hosts.gpu01]\naddress = \"node1\"\n[hosts.trainer]\naddress = \"rack-01\"\n",
    );
    let rb = env.write(
        "names.lua",
        r#"runbook { name = "names" }
local names = { "gpu01x", "gpu01", "rack-02", "node1" }
local handles = {}
for i, n in ipairs(names) do handles[i] = target(n) end
step("reach", function()
  for i, t in ipairs(handles) do
    local ok, err = pcall(function() t:exec({ "true" }, { read_only = true }) end)
    log.info(names[i] .. " | " .. tostring(err))
  end
end)
"#,
    );
    // Made at the top level: checked without contacting anything.
    Run::cmd(&env, ["check"])
        .arg(&rb)
        .arg("--ssh-config")
        .arg(&config)
        .arg("--inventory")
        .arg(&inventory)
        .expect_exit(0)
        .run();
    let out = Run::new(&env, &rb)
        .arg("--ssh-config")
        .arg(&config)
        .arg("--inventory")
        .arg(&inventory)
        .yes()
        .json()
        .run();
    out.assert_exit(0);
    let said = |name: &str| -> String {
        out.logs()
            .into_iter()
            .find_map(|l| l.strip_prefix(&format!("{name} | ")).map(str::to_string))
            .unwrap()
    };
    let (cfg, inv) = (config.display(), inventory.display());
    for (name, want) in [
        (
            "gpu01x",
            format!("(gpu01x is a plain host name: in neither the inventory {inv} nor a Host of {cfg}; did you mean 'gpu01'?)"),
        ),
        ("gpu01", format!("(gpu01 is from the inventory {inv})")),
        ("rack-02", format!("(rack-02 is from `Host rack-*` in {cfg})")),
        ("node1", format!("(node1 is from `Host node1` in {cfg})")),
    ] {
        let got = said(name);
        assert!(
            got.contains(&format!("cannot connect to {name}: ")) && got.contains(&want),
            "{name}: want {want:?} in {got}"
        );
    }
    // A name no resolver takes is still refused where the runbook names it.
    let bad = env.write(
        "bad.lua",
        "runbook { name = \"bad\" }\nlocal t = target(\"gpu_01\")\n",
    );
    let out = Run::cmd(&env, ["check"]).arg(&bad).expect_exit(2).run();
    assert!(
        out.stderr_text()
            .contains("bad.lua:2: target(\"gpu_01\"): unknown target 'gpu_01'"),
        "{}",
        out.describe()
    );
}

/// `list` and `show` read names as a run does, with `--ssh-config`: a runbook naming a
/// Host only that config has is listed by its name, not "(invalid)".
#[test]
fn list_and_show_take_the_ssh_config() {
    let env = Env::new();
    let dir = env.tmp.path().join("books");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("gpu.lua"),
        "runbook { name = \"gpu-check\", description = \"on gpu_01\" }\nlocal t = target(\"gpu_01\")\nstep(\"look\", function() end)\n",
    )
    .unwrap();
    let config = env.write("ssh_config", "Host gpu_01\n  HostName 127.0.0.1\n");
    let line = |out: &Output| -> String {
        out.stdout_text()
            .lines()
            .find(|l| l.contains("gpu.lua"))
            .unwrap_or_default()
            .to_string()
    };
    let without = Run::cmd(&env, ["list"]).arg(&dir).expect_exit(0).run();
    assert!(
        line(&without).contains("(invalid)"),
        "{}",
        without.describe()
    );
    let with = Run::cmd(&env, ["list"])
        .arg(&dir)
        .arg("--ssh-config")
        .arg(&config)
        .expect_exit(0)
        .run();
    let l = line(&with);
    assert!(
        l.contains("gpu-check") && l.contains("on gpu_01") && !l.contains("(invalid)"),
        "{l}"
    );
    Run::cmd(&env, ["show"])
        .arg(dir.join("gpu.lua"))
        .arg("--ssh-config")
        .arg(&config)
        .expect_exit(0)
        .stdout_has("1. look")
        .run();
}
