//! S1 (issue 20): the ssh executor on loopback through `dsh exec-helper`, against
//! the local executor, interleaved; the wrapper path's figure beside it.
//!
//! A real sshd on 127.0.0.1 (its own host key, a client key, keys only) carries
//! both ssh daemons' calls; the "remote" host is this machine, so the two sides
//! share the CPU as the local daemon does. Three daemons run at once: `local`,
//! `ssh` with `helper = "required"` and `ssh` with `helper = "off"`. The first
//! helper call of a fresh helper directory is the first contact (upload included)
//! and is reported, not judged.

use crate::*;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Instant;

/// A running sshd for the scenario; killed on drop.
struct Sshd {
    child: std::process::Child,
    port: u16,
    dir: PathBuf,
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn keygen(path: &Path) -> Res<()> {
    let status = std::process::Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(path)
        .status()
        .map_err(|e| format!("ssh-keygen: {e}"))?;
    status
        .success()
        .then_some(())
        .ok_or_else(|| "ssh-keygen failed".to_string())
}

/// Starts sshd in `dir`, or says why it cannot (then the scenario is skipped).
fn start_sshd(dir: &Path) -> Res<Sshd> {
    let sshd = ["/usr/sbin/sshd", "/usr/bin/sshd"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .ok_or("no sshd (Debian: openssh-server)")?;
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    keygen(&dir.join("host_key"))?;
    keygen(&dir.join("client_key"))?;
    std::fs::copy(dir.join("client_key.pub"), dir.join("authorized_keys"))
        .map_err(|e| e.to_string())?;
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        let _ = std::fs::create_dir_all("/run/sshd");
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| e.to_string())?;
    let config = format!(
        "ListenAddress 127.0.0.1\nPort {port}\nHostKey {d}/host_key\n\
         AuthorizedKeysFile {d}/authorized_keys\nPasswordAuthentication no\n\
         KbdInteractiveAuthentication no\nPubkeyAuthentication yes\nUsePAM no\n\
         StrictModes no\nPermitRootLogin prohibit-password\nPidFile none\n\
         MaxSessions 1000\nMaxStartups 100\n",
        d = dir.display()
    );
    std::fs::write(dir.join("sshd_config"), config).map_err(|e| e.to_string())?;
    let mut child = std::process::Command::new(sshd)
        .args(["-D", "-e", "-f"])
        .arg(dir.join("sshd_config"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("start sshd: {e}"))?;
    let stderr = child.stderr.take().ok_or("sshd has no stderr")?;
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(stderr));
    let listening = lines
        .by_ref()
        .any(|l| l.as_deref().is_ok_and(|l| l.contains("Server listening")));
    if !listening {
        let _ = child.kill();
        let _ = child.wait();
        return Err("sshd did not start".into());
    }
    // Keep draining its stderr so the server never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    let host_key = std::fs::read_to_string(dir.join("host_key.pub")).map_err(|e| e.to_string())?;
    std::fs::write(
        dir.join("known_hosts"),
        format!("[127.0.0.1]:{port} {host_key}"),
    )
    .map_err(|e| e.to_string())?;
    Ok(Sshd {
        child,
        port,
        dir: dir.to_path_buf(),
    })
}

fn ssh_section(sshd: &Sshd, helper: &str, helper_dir: &Path) -> String {
    format!(
        "[exec]\nkind = \"ssh\"\n[exec.ssh]\nhost = \"127.0.0.1\"\nport = {}\n\
         identity_file = \"{d}/client_key\"\nknown_hosts_file = \"{d}/known_hosts\"\n\
         helper = \"{helper}\"\nhelper_dir = \"{}\"\n",
        sshd.port,
        helper_dir.display(),
        d = sshd.dir.display()
    )
}

/// S1: sequential `bash true` calls through the ssh executor with the helper,
/// against the local executor's, interleaved (`b1_calls` of each); the wrapper
/// path (a twentieth as many: each takes hundreds of ms) and the first contact
/// reported beside them.
pub(crate) async fn s1(env: &Env) -> Res<Outcome> {
    let n = env.counts.b1_calls;
    let n_wrapper = (n / 20).max(3);
    let sshd = match start_sshd(&env.root.join("s1-sshd")) {
        Ok(s) => s,
        Err(why) => {
            return Ok(Outcome {
                rows: Vec::new(),
                notes: vec![format!("S1 skipped: {why}")],
                details: json!({"skipped": why}),
            });
        }
    };
    let helper_dir = env.root.join("s1-helper-cache");
    let local = Daemon::start(&env.root, "s1-local").await?;
    let helper = Daemon::start_config(
        &env.root,
        "s1-helper",
        &ssh_section(&sshd, "required", &helper_dir),
    )
    .await?;
    let wrapper = Daemon::start_config(
        &env.root,
        "s1-wrapper",
        &ssh_section(&sshd, "off", &helper_dir),
    )
    .await?;
    let (mut lc, mut hc, mut wc) = (
        local.client().await?,
        helper.client().await?,
        wrapper.client().await?,
    );
    let (ls, hs, ws) = (
        lc.new_session(&env.work).await?,
        hc.new_session(&env.work).await?,
        wc.new_session(&env.work).await?,
    );
    for (c, s) in [(&mut lc, &ls), (&mut hc, &hs), (&mut wc, &ws)] {
        c.set_mode(s, "auto").await?;
    }
    // First contact: the helper is uploaded and started by the first call.
    let t = Instant::now();
    hc.bash_true(&hs).await?;
    let first_contact = t.elapsed();
    let executor = hc.request("_dsh/status", json!({}), REQUEST_LIMIT).await?["executor"].clone();
    if executor != "ssh+helper" {
        return Err(format!("the helper daemon runs {executor}, not ssh+helper"));
    }
    wc.bash_true(&ws).await?;
    for _ in 0..env.counts.warmup {
        lc.bash_true(&ls).await?;
        hc.bash_true(&hs).await?;
    }
    let (mut loc, mut hel, mut wra) = (Vec::with_capacity(n), Vec::with_capacity(n), Vec::new());
    for i in 0..n {
        if i % 2 == 0 {
            hel.push(timed(hc.bash_true(&hs)).await?.0);
            loc.push(timed(lc.bash_true(&ls)).await?.0);
        } else {
            loc.push(timed(lc.bash_true(&ls)).await?.0);
            hel.push(timed(hc.bash_true(&hs)).await?.0);
        }
        if i % (n / n_wrapper).max(1) == 0 && wra.len() < n_wrapper {
            wra.push(timed(wc.bash_true(&ws)).await?.0);
        }
    }
    let size = std::fs::read_dir(&helper_dir)
        .map_err(|e| e.to_string())?
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("helper-"))
        .filter_map(|e| e.metadata().ok())
        .map(|m| m.len())
        .max()
        .unwrap_or(0);
    local.stop().await?;
    helper.stop().await?;
    wrapper.stop().await?;
    drop(sshd);
    let (l, h, w) = (Stats::of(&loc), Stats::of(&hel), Stats::of(&wra));
    let rows = vec![
        Row {
            id: "S1",
            scenario: format!("{n} sequential `bash true` calls, ssh+helper on loopback vs local"),
            metric: "median latency",
            unit: "ms",
            dsh: h.p50,
            baseline: Some(l.p50),
            ratio: Some(h.p50 / l.p50),
            target: Target::RatioAtMost(1.5),
        },
        Row {
            id: "S1w",
            scenario: format!(
                "{n_wrapper} calls on the ssh wrapper path (helper = \"off\"), same loop"
            ),
            metric: "median latency",
            unit: "ms",
            dsh: w.p50,
            baseline: Some(l.p50),
            ratio: Some(w.p50 / l.p50),
            // Reported beside S1, not a target of its own: the helper is the fix.
            target: Target::RatioAtMost(f64::INFINITY),
        },
    ];
    Ok(Outcome {
        rows,
        notes: vec![
            h.line("S1 ssh+helper call"),
            l.line("S1 local call     "),
            w.line("S1 wrapper call   "),
            format!(
                "S1 first contact (upload of a {size}-byte dsh, gzip on the wire, and start): {:.2} s",
                first_contact.as_secs_f64()
            ),
        ],
        details: json!({"helper": h.json(), "local": l.json(), "wrapper": w.json(),
                        "first_contact_s": first_contact.as_secs_f64(),
                        "helper_bytes": size}),
    })
}
