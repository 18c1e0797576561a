#!/usr/bin/env bash
# What a GPU session carries to the device machine (issue 26): the CUDA build of test_gpu, tokenmill
# and bench_gpu_kernels (the kernels one at a time) and the shared libraries they need beyond the C and C++ runtimes (the device's image is not this
# Debian), in .gpu-bundle/ (ignored by git; ~25 MB: the device tool carries 64 MiB together with the
# working tree, so ICU, 31 MB of data, is left out of this build: TM_ICU=OFF). Then, with the tool:
#
#   run(command="LD_LIBRARY_PATH=.gpu-bundle/lib scripts/gpu_check.sh .gpu-bundle/test_gpu .gpu-bundle/tokenmill
#                .gpu-bundle/bench_gpu_kernels",
#       carry=[".gpu-bundle"], timeout_s=540)
#
# The binaries need glibc 2.34 or later there (checked below).
set -euo pipefail
cd "$(dirname "$0")/.."
B=${BUILD:-build-gpu-bundle}
cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTM_CUDA=ON -DTM_BUILD_BENCH=ON -DTM_ICU=OFF >/dev/null
cmake --build "$B" --target test_gpu tokenmill bench_gpu_kernels
rm -rf .gpu-bundle && mkdir -p .gpu-bundle/lib
cp "$B/tests/test_gpu" "$B/tokenmill" "$B/bench/bench_gpu_kernels" .gpu-bundle/
strip .gpu-bundle/test_gpu .gpu-bundle/tokenmill .gpu-bundle/bench_gpu_kernels
for lib in $(ldd "$B/tokenmill" "$B/tests/test_gpu" "$B/bench/bench_gpu_kernels" | awk '/=> \//{print $3}' | sort -u); do
  case "$(basename "$lib")" in libc.so* | libm.so* | libstdc++* | libgcc_s* | ld-linux* | libpthread* | libdl* | librt*) continue ;; esac
  cp -L "$lib" .gpu-bundle/lib/
done
need=$(objdump -T .gpu-bundle/tokenmill .gpu-bundle/test_gpu .gpu-bundle/bench_gpu_kernels .gpu-bundle/lib/* 2>/dev/null | grep -o 'GLIBC_[0-9.]*' | sort -V | tail -1)
echo "gpu_bundle: $(du -sh .gpu-bundle | cut -f1) in .gpu-bundle (needs ${need:-?} on the device)"
