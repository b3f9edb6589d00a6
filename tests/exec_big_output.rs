//! E5 and T6 at scale: a command printing 1 GiB costs the executor no more memory
//! than its output bound, while the spill file receives every byte. Alone in its
//! own test binary so the process's peak memory reflects this test only.

mod common;

use dsh::exec::{BashExecutor, ExecRequest, Spill};
use std::io::Read;
use tokio_util::sync::CancellationToken;

const GIB: u64 = 1 << 30;
const LINE: &[u8] = b"0123456789abcdef\n";

fn vm_hwm_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e5_t6_one_gib_of_output_keeps_memory_bounded_and_spills_every_byte() {
    let dir = tempfile::tempdir().unwrap();
    let exec = common::local(dir.path());
    let before = vm_hwm_kib();
    let spec = exec.resolve(ExecRequest {
        command: format!("yes 0123456789abcdef | head -c {GIB}"),
        workdir: Some(dir.path().to_path_buf()),
        ..ExecRequest::default()
    });
    let out = exec.run(spec, CancellationToken::new()).await.unwrap();
    let growth_kib = vm_hwm_kib().saturating_sub(before);
    assert_eq!(out.exit_code, Some(0));
    assert!(out.stdout.truncated);
    assert_eq!(out.stdout.total_bytes, GIB);
    assert!(out.stdout.text.len() <= 64_000);
    // The peak memory of the whole test process grew by far less than the output.
    assert!(growth_kib < 32 * 1024, "peak RSS grew by {growth_kib} KiB");

    let Spill::Written(path) = &out.stdout.spill else {
        panic!("no spill file: {:?}", out.stdout.spill)
    };
    assert_eq!(std::fs::metadata(path).unwrap().len(), GIB);
    // Compare every byte with the pattern `yes` produced.
    let mut file = std::io::BufReader::with_capacity(1 << 20, std::fs::File::open(path).unwrap());
    let mut buf = vec![0u8; 1 << 20];
    // The pattern repeated past one buffer's length, so any chunk at any offset is
    // one slice of it (a memcmp, fast even in a debug build).
    let pattern: Vec<u8> = LINE
        .iter()
        .copied()
        .cycle()
        .take(buf.len() + LINE.len())
        .collect();
    let mut offset: u64 = 0;
    loop {
        let n = file.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        let phase = (offset % LINE.len() as u64) as usize;
        assert!(
            buf[..n] == pattern[phase..phase + n],
            "bytes differ in the chunk at {offset}"
        );
        offset += n as u64;
    }
    assert_eq!(offset, GIB);
    // The tail is the end of the same stream.
    let tail = out.stdout.text.as_bytes();
    let start = GIB - tail.len() as u64;
    for (i, b) in tail.iter().enumerate() {
        assert_eq!(*b, LINE[((start + i as u64) % LINE.len() as u64) as usize]);
    }
}
