// Custom plan files: algorithms written as text, loaded at init (TUTTI_ALGO_FILE), verified
// before they are accepted.
//
// Format. One directive per line; '#' starts a comment; blank lines are ignored; tokens are
// separated by spaces, so a value (an expression) must not contain spaces.
//
//   algorithm <name>            starts an algorithm (a file may hold several); the name is what
//                               NCCL_ALGO selects ([a-z0-9_-], at most 64 characters)
//   ranks <n>                   the rank count it is written for (1..4096); required, before any
//                               coll
//   deterministic <yes|no>      whether the reduction order is fixed (default no)
//   coll <collective> [root <r>]
//                               starts the plans of one collective: allreduce, allgather,
//                               reducescatter, broadcast, reduce, alltoall, gather, scatter.
//                               Rooted collectives give the root the plans are written for
//                               (default 0); each collective appears once per algorithm
//   rank <r> | rank *           starts rank r's plan for the current collective; "rank *" is the
//                               plan of every rank that has no section of its own
//   lane <key=value>...         starts a lane of the current rank:
//                                 kind=none|ring|direct     connections (default none)
//                                 tag=<int>                 0..65535 (default 0)
//                                 send=<expr>,<expr>,...    send peers (sendConn indexes them)
//                                 recv=<expr>,...           receive peers (recvConn indexes them)
//                                 layout=split|blocks|whole (default whole)
//                                 chunks=<int>              Split: chunks per tile (0: nranks)
//                                 scratch=<int>             scratch chunks per tile
//   <op> <word>...              a step of the current lane. Ops: send, recv, recv-send,
//                               recv-reduce-send, recv-reduce-copy, recv-reduce-copy-send, copy,
//                               reduce (local: dst = dst (op) src).
//                               Words: src=<buf>, dst=<buf>, to=<expr> (sendConn, default 0),
//                               from=<expr> (recvConn, default 0), pre (kPre), post (kPost),
//                               join (kJoin: this step and the next travel as one message; a
//                               joined run keeps one op and connection, ends without join, and
//                               the receiver must join as many steps as the sender; plan.h).
//                               <buf> is in, out, in[<expr>], out[<expr>] or scratch[<expr>];
//                               a bare in/out is chunk -1 (a single-block buffer).
//
// Expressions are integers built from numbers, r (the rank), n (the rank count), + - * / % and
// parentheses; / truncates and % is always non-negative ((r-1)%n is the previous rank).
//
// Every collective of every algorithm is verified (algorithms/verify.h) for its rank count, in
// and out of place, before the file is accepted; a rejected plan names the file and the
// verifier's reason. Building a plan for another rank count or root throws InvalidUsage.
//
// Example: a ring all-reduce for four ranks.
//
//   algorithm myring
//   ranks 4
//   coll allreduce
//   rank *
//   lane kind=ring send=(r+1)%n recv=(r-1)%n layout=split
//   send src=in[r] pre
//   recv-reduce-send src=in[(r-1)%n] pre
//   recv-reduce-send src=in[(r-2)%n] pre
//   recv-reduce-copy-send src=in[(r+1)%n] dst=out[(r+1)%n] pre post
//   recv-send dst=out[r]
//   recv-send dst=out[(r-1)%n]
//   recv dst=out[(r-2)%n]
//
// Limits, so a bad file cannot exhaust memory: ranks <= 4096, lines <= 1 MiB, steps per lane
// <= 65536, lanes per rank <= 4096, 2^22 steps over all ranks of an algorithm.
#pragma once

#include <string>
#include <vector>

#include "algorithms/registry.h"

namespace tutti::plan {

// Loads the algorithms of one file. Throws tutti::Error (InvalidUsage) naming file:line and what
// was expected, or the algorithm and the verifier's reason.
std::vector<Algorithm> loadPlanFile(const std::string& path);

// The same for text already in memory; `origin` names it in messages.
std::vector<Algorithm> parsePlanText(const std::string& text, const std::string& origin);

// TUTTI_ALGO_FILE's value: files separated by ':'.
std::vector<Algorithm> loadPlanFiles(const std::string& list);

}  // namespace tutti::plan
