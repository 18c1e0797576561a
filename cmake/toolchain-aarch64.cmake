# Cross-compiling tokenmill for aarch64 Linux on a Debian (bookworm) x86-64 host with multiarch:
# g++-aarch64-linux-gnu and the dependencies' arm64 -dev packages (libfmt-dev:arm64 ...), as
# scripts/cross-aarch64.sh installs them. The result runs under qemu-aarch64 (or on an arm64 box).
#   cmake -S . -B build-aarch64 -DCMAKE_TOOLCHAIN_FILE=cmake/toolchain-aarch64.cmake -DTM_BUILD_BENCH=OFF
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(TM_CROSS_TRIPLET aarch64-linux-gnu)
set(CMAKE_C_COMPILER ${TM_CROSS_TRIPLET}-gcc)
set(CMAKE_CXX_COMPILER ${TM_CROSS_TRIPLET}-g++)
# Debian multiarch (as Debian's own debtoolchainfilegen does it: no sysroot): the arm64 libraries and
# their CMake packages are in /usr/lib/aarch64-linux-gnu, which CMake searches instead of the host's
# x86-64 directory for this library architecture; headers in /usr/include are shared by all
# architectures; the cross C library is in /usr/aarch64-linux-gnu.
set(CMAKE_LIBRARY_ARCHITECTURE ${TM_CROSS_TRIPLET})
# pkg-config must see only the arm64 .pc files (and the architecture-independent ones), never the
# host's x86-64 libraries.
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/${TM_CROSS_TRIPLET}/pkgconfig:/usr/share/pkgconfig)
set(ENV{PKG_CONFIG_PATH} "")
# How CMake (e.g. gtest_discover_tests at ctest time) runs a target binary: against the multiarch
# arm64 C library in / (scripts/cross-aarch64.sh says why not the cross toolchain's tree).
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -L /)
