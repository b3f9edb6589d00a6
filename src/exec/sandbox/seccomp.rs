//! The seccomp floor of every sandboxed command (E8), compiled with rust-vmm's
//! `seccompiler` once when the executor starts and handed to bwrap (`--seccomp FD`),
//! which sets no_new_privs and installs it just before it runs the command, so the
//! filter holds for the command and everything it starts (a seccomp filter is
//! inherited across fork and exec and can never be removed).
//!
//! Allow by default, deny a short list with `EPERM`: the list is what lets a
//! process reach past the sandbox's walls (a host service over a Unix socket, the
//! kernel's attack surface of io_uring and bpf, other processes' memory, mounts that
//! would undo the layout, the kernel keyring), not what ordinary builds use.
//! Foreign system call entries are refused too: a 32-bit entry (`int 0x80`, another
//! audit architecture) kills the process (seccompiler's architecture check), and on
//! x86_64 every x32 system call fails with `EPERM`, since an ABI the filter does not
//! describe would be a way around it.

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};
use std::collections::BTreeMap;

/// What the floor lets through, from `[exec.sandbox]`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Floor {
    /// `allow_unix_sockets`: new Unix sockets (and datagram socket pairs) allowed.
    pub allow_unix_sockets: bool,
}

/// System calls denied whatever their arguments.
fn always_denied() -> Vec<i64> {
    vec![
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
        libc::SYS_ptrace,
        libc::SYS_process_vm_readv,
        libc::SYS_process_vm_writev,
        libc::SYS_bpf,
        libc::SYS_keyctl,
        libc::SYS_add_key,
        libc::SYS_request_key,
        libc::SYS_userfaultfd,
        libc::SYS_mount,
        libc::SYS_umount2,
        libc::SYS_pivot_root,
        libc::SYS_move_mount,
        libc::SYS_open_tree,
        libc::SYS_fsopen,
        libc::SYS_fsconfig,
        libc::SYS_fsmount,
        libc::SYS_fspick,
        libc::SYS_mount_setattr,
    ]
}

fn arg_eq(index: u8, value: u64) -> Result<SeccompCondition, String> {
    SeccompCondition::new(index, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, value)
        .map_err(|e| e.to_string())
}

/// The filter's rules: each system call with the argument conditions under which
/// it is denied (an empty list: always).
fn rules(floor: Floor) -> Result<BTreeMap<i64, Vec<SeccompRule>>, String> {
    let rule = |conditions| SeccompRule::new(conditions).map_err(|e| e.to_string());
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> =
        always_denied().into_iter().map(|nr| (nr, vec![])).collect();
    // vsock reaches the host of a VM (and its services) whatever the network.
    let mut socket = vec![rule(vec![arg_eq(0, libc::AF_VSOCK as u64)?])?];
    let mut socketpair = vec![rule(vec![arg_eq(0, libc::AF_VSOCK as u64)?])?];
    if !floor.allow_unix_sockets {
        socket.push(rule(vec![arg_eq(0, libc::AF_UNIX as u64)?])?);
        // The type's low bits, without SOCK_NONBLOCK / SOCK_CLOEXEC. SOCK_RAW is
        // refused too: for a Unix pair the kernel makes it a datagram pair.
        for kind in [libc::SOCK_DGRAM, libc::SOCK_RAW] {
            let kind = SeccompCondition::new(
                1,
                SeccompCmpArgLen::Dword,
                SeccompCmpOp::MaskedEq(0xf),
                kind as u64,
            )
            .map_err(|e| e.to_string())?;
            socketpair.push(rule(vec![arg_eq(0, libc::AF_UNIX as u64)?, kind])?);
        }
    }
    rules.insert(libc::SYS_socket, socket);
    rules.insert(libc::SYS_socketpair, socketpair);
    Ok(rules)
}

/// The architecture dsh was built for, as seccompiler names it.
fn target() -> Result<TargetArch, String> {
    TargetArch::try_from(std::env::consts::ARCH)
        .map_err(|_| format!("no seccomp floor for {}", std::env::consts::ARCH))
}

/// The floor as a BPF program.
pub fn program(floor: Floor) -> Result<BpfProgram, String> {
    let filter = SeccompFilter::new(
        rules(floor)?,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        target()?,
    )
    .map_err(|e| format!("cannot build the seccomp floor: {e}"))?;
    let mut program: BpfProgram = filter
        .try_into()
        .map_err(|e| format!("cannot compile the seccomp floor: {e}"))?;
    deny_x32(&mut program);
    Ok(program)
}

/// On x86_64, inserts "x32 system call -> EPERM" right after the program loads the
/// system call number (seccompiler's prologue: load the architecture, check it,
/// kill on a mismatch, load the number). Every jump of seccompiler's code is
/// relative and forward from its own instruction, so nothing after the insertion
/// changes meaning.
fn deny_x32(program: &mut BpfProgram) {
    #[cfg(target_arch = "x86_64")]
    {
        use seccompiler::sock_filter;
        const X32_SYSCALL_BIT: u32 = 0x4000_0000;
        const BPF_JMP_JGE_K: u16 = 0x05 | 0x30;
        const BPF_RET_K: u16 = 0x06;
        const LOADS_NR: usize = 3;
        if program.len() <= LOADS_NR {
            return;
        }
        program.splice(
            LOADS_NR + 1..LOADS_NR + 1,
            [
                sock_filter {
                    code: BPF_JMP_JGE_K,
                    jt: 0,
                    jf: 1,
                    k: X32_SYSCALL_BIT,
                },
                sock_filter {
                    code: BPF_RET_K,
                    jt: 0,
                    jf: 0,
                    k: libc::SECCOMP_RET_ERRNO | libc::EPERM as u32,
                },
            ],
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = program;
}

/// The floor as bwrap reads it: the program's instructions in the kernel's
/// `struct sock_filter` layout (u16 code, u8 jt, u8 jf, u32 k, native order), as
/// libseccomp's `seccomp_export_bpf` writes them.
pub fn bytes(floor: Floor) -> Result<Vec<u8>, String> {
    let program = program(floor)?;
    let mut out = Vec::with_capacity(program.len() * 8);
    for insn in &program {
        out.extend_from_slice(&insn.code.to_ne_bytes());
        out.push(insn.jt);
        out.push(insn.jf);
        out.extend_from_slice(&insn.k.to_ne_bytes());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_program_checks_the_architecture_then_refuses_x32_before_any_rule() {
        let program = program(Floor::default()).unwrap();
        // Load the architecture, compare, kill on a mismatch, load the number.
        assert_eq!(program[2].k, libc::SECCOMP_RET_KILL_PROCESS);
        assert_eq!(program[3].code, 0x20, "a load of the system call number");
        #[cfg(target_arch = "x86_64")]
        {
            assert_eq!((program[4].code, program[4].k), (0x35, 0x4000_0000));
            assert_eq!(program[5].k, libc::SECCOMP_RET_ERRNO | libc::EPERM as u32);
        }
    }

    #[test]
    fn the_bytes_are_eight_per_instruction_in_the_kernels_layout() {
        let program = program(Floor::default()).unwrap();
        let bytes = bytes(Floor::default()).unwrap();
        assert_eq!(bytes.len(), program.len() * 8);
        assert_eq!(&bytes[20..24], &program[2].k.to_ne_bytes());
    }

    #[test]
    fn unix_sockets_are_denied_unless_allowed() {
        let strict = rules(Floor::default()).unwrap();
        let open = rules(Floor {
            allow_unix_sockets: true,
        })
        .unwrap();
        assert_eq!(strict[&libc::SYS_socket].len(), 2);
        assert_eq!(open[&libc::SYS_socket].len(), 1, "vsock stays denied");
        assert_eq!(strict[&libc::SYS_socketpair].len(), 3, "vsock, dgram, raw");
        assert!(strict[&libc::SYS_ptrace].is_empty(), "always denied");
        assert!(
            program(Floor::default()).unwrap().len()
                > program(Floor {
                    allow_unix_sockets: true
                })
                .unwrap()
                .len()
        );
    }
}
