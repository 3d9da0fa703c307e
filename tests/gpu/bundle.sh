#!/usr/bin/env bash
# Prepares what tests/gpu/run.sh needs on a GPU machine that cannot build tutti itself (no hwloc,
# Catch2 or MPI there): a CUDA build's libraries, GPU test binaries and tools, stripped, with the
# non-system shared libraries they load, in one folder small enough to carry.
#
#   tests/gpu/bundle.sh [BUILD_DIR [BUNDLE_DIR]]     (defaults: build-gpu, gpu-bundle)
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build-gpu}
DEST=${2:-gpu-bundle}
cmake -S . -B "$BUILD" -G Ninja -DTUTTI_CUDA=ON -DCMAKE_BUILD_TYPE=Release -DTUTTI_PERF_MPI=OFF >/dev/null
targets=(tutti tutti_nccl tutti_gpu_check tutti_gpu_collectives tutti_gpu_semantics tutti_gpu_bench tutti-topo tutti-info)
for p in all_reduce all_gather reduce_scatter broadcast reduce alltoall sendrecv; do targets+=("${p}_perf"); done
ninja -C "$BUILD" "${targets[@]}"
rm -rf "$DEST"
mkdir -p "$DEST/bin" "$DEST/lib" "$DEST/nccl"
cp "$BUILD"/tests/gpu/tutti_gpu_check "$BUILD"/tests/gpu/tutti_gpu_collectives "$BUILD"/tests/gpu/tutti_gpu_semantics "$BUILD"/tests/gpu/tutti_gpu_bench "$DEST/bin/"
cp "$BUILD"/tools/tutti-topo "$BUILD"/tools/tutti-info "$DEST/bin/"
for p in all_reduce all_gather reduce_scatter broadcast reduce alltoall sendrecv; do cp "$BUILD/perf/${p}_perf" "$DEST/bin/"; done
cp -L "$BUILD"/libtutti.so.0 "$DEST/lib/"
cp -L "$BUILD"/nccl/libnccl.so.2 "$DEST/nccl/"
# hwloc and what it loads that a GPU machine's image may lack.
for lib in libhwloc.so.15 libudev.so.1; do cp -L "$(ldconfig -p | awk -v l="$lib" '$1 == l {print $NF; exit}')" "$DEST/lib/"; done
strip --strip-unneeded "$DEST"/bin/* "$DEST"/lib/* "$DEST"/nccl/*
cp tests/gpu/run.sh tests/gpu/torch_check.py "$DEST/"
git rev-parse --short HEAD >"$DEST/COMMIT" 2>/dev/null || true
du -sh "$DEST"
