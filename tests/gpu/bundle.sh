#!/usr/bin/env bash
# Prepares what tests/gpu/run.sh needs on a GPU machine that cannot build tutti itself (no hwloc,
# Catch2, MPI or CUDA toolkit there): a CUDA build's libraries, GPU test binaries and tools, stripped,
# with the shared libraries they load that such a machine may lack (the CUDA runtime, libcudart, and
# whatever else `ldd` resolves from the CUDA toolkit; hwloc and udev), in one folder small enough to
# carry. Run it on the build machine, never on the GPU machine: a GPU's time is lent by the minute.
#
#   tests/gpu/bundle.sh [BUILD_DIR [BUNDLE_DIR]]     (defaults: build-gpu, gpu-bundle)
#
# The bundle holds bin/ (tests, tools, perf), lib/ (libtutti and what the binaries load), nccl/
# (libnccl.so.2, for LD_PRELOAD), run.sh, torch_check.py, COMMIT and CUDA_RUNTIME (the toolkit's
# version, e.g. 13.0: run.sh's preflight fails where the driver is older). It fails when a bundled
# binary or library would load a library that is neither in the bundle nor on a typical system.
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

# The CUDA toolkit the build used (nvcc's folder's parent), its version, and every library that a
# bundled file loads from it (libcudart.so.13 for the tutti_gpu_* binaries), under the name the
# loader asks for. Repeated until nothing new comes: a copied library may load another.
nvcc=$(sed -n 's/^CMAKE_CUDA_COMPILER:[A-Z]*=//p' "$BUILD/CMakeCache.txt")
toolkit=$(realpath "$(dirname "$nvcc")/..")
"$nvcc" --version | sed -n 's/.*release \([0-9]*\.[0-9]*\).*/\1/p' >"$DEST/CUDA_RUNTIME"
[[ -s $DEST/CUDA_RUNTIME ]] || { echo "bundle.sh: no CUDA version from $nvcc --version" >&2; exit 1; }
resolved() {  # resolved FILE: "NAME PATH" for each library the loader finds for FILE
  LD_LIBRARY_PATH="$DEST/lib:$DEST/nccl${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ldd "$1" 2>/dev/null |
    awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}'
}
while :; do
  copied=0
  for f in "$DEST"/bin/* "$DEST"/lib/* "$DEST"/nccl/*; do
    while read -r name path; do
      real=$(realpath "$path")
      if [[ $real == "$toolkit"/* && ! -e $DEST/lib/$name ]]; then
        cp -L "$path" "$DEST/lib/$name"
        echo "bundled $name (from $real)"
        copied=1
      fi
    done < <(resolved "$f")
  done
  ((copied)) || break
done
strip --strip-unneeded "$DEST"/bin/* "$DEST"/lib/* "$DEST"/nccl/*
cp tests/gpu/run.sh tests/gpu/torch_check.py "$DEST/"
git rev-parse --short HEAD >"$DEST/COMMIT" 2>/dev/null || true

# What a GPU machine will load: nothing missing, nothing from the toolkit outside the bundle.
bad=0
for f in "$DEST"/bin/* "$DEST"/lib/* "$DEST"/nccl/*; do
  if LD_LIBRARY_PATH="$DEST/lib:$DEST/nccl${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ldd "$f" 2>/dev/null | grep 'not found'; then
    echo "bundle.sh: $f needs a library that is not found" >&2
    bad=1
  fi
  while read -r name path; do
    if [[ $(realpath "$path") == "$toolkit"/* ]]; then
      echo "bundle.sh: $f loads $name from the CUDA toolkit ($path), not from the bundle" >&2
      bad=1
    fi
  done < <(resolved "$f")
done
((bad == 0)) || exit 1
echo "CUDA runtime $(cat "$DEST/CUDA_RUNTIME"), commit $(cat "$DEST/COMMIT" 2>/dev/null || echo unknown)"
du -sh "$DEST"
