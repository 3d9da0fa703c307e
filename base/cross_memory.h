// Reading and writing another process's memory with Linux cross-memory attach (process_vm_readv,
// process_vm_writev), and the permission it needs: the kernel lets a process read another of the same user that it
// could ptrace; under Yama's ptrace_scope 1 only a descendant, or the one process the target names (prctl
// PR_SET_PTRACER). Used by zero-copy between rank processes of a host (transports/shm, kernels/host/host_executor.cpp)
// and by one-sided puts between them (runtime/launch/rma.cpp).
#pragma once

#include <sys/types.h>
#include <cstddef>
#include <string>

namespace tutti::cma {

// Copies `bytes` at `remote` in process `pid` to `local`. Returns 0, or the errno of the first
// failure (ESRCH: the process is gone; EPERM: not allowed; EFAULT: not mapped there). A short
// read (a range only partly mapped) counts as EFAULT.
int read(pid_t pid, const void* remote, void* local, size_t bytes);

// Copies `bytes` at `local` to `remote` in process `pid`; the same answers as read(). The same
// permission rules apply: the kernel checks the writer as it checks a reader.
int write(pid_t pid, void* remote, const void* local, size_t bytes);

// "ESRCH (No such process)": an errno as the messages of cross-memory reads name it.
std::string errnoName(int error);

// /proc/sys/kernel/yama/ptrace_scope: 0 (classic ptrace rules), 1 (restricted: descendants and
// a named ptracer only), 2 (admin only), 3 (none); -1 where Yama is absent (classic rules).
int ptraceScope();

// Lets `reader` read this process under ptrace_scope 1 by naming it this process's ptracer. A
// process has one: the first reader named keeps it, and a second, other reader is refused (the
// first's reads would otherwise start failing mid-job). Returns true if `reader` is (now) the
// named one; false with *whyNot set otherwise. Never names "any process" (PR_SET_PTRACER_ANY).
bool nameReader(pid_t reader, std::string* whyNot);

}  // namespace tutti::cma
