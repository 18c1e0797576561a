# tm_module(NAME DEPS a b ... LIBS x y ...)
# Builds the static library tm_NAME from every src/NAME/**/*.cpp (globbed, so adding a file needs
# no CMake edit). Files ending in _avx2.cpp / _avx512.cpp / _amx.cpp get that ISA's flags (_amx: AVX-512
# plus the AMX tiles); nothing else does,
# so the rest of the binary runs on any x86-64. On other processors (aarch64) those files are not
# compiled at all: the kernel table (src/kernels/dispatch.cpp) then holds the portable kernels, and
# a backend for that processor (say *_neon.cpp, with its flags added here) registers there.
#
# The ODR rule for ISA files: an inline function with external linkage compiled with AVX-512 flags
# could be the copy the linker keeps for the whole program (and crash a CPU without AVX-512). So ISA
# files include only <immintrin.h>, C/C++ headers without such functions of their own (<cstdint>,
# <cstring>), plain-data headers (kernels/kernel_abi.h, attention_abi.h, kernel_table.h), and headers
# whose functions all have internal linkage (`static inline`, static templates): core/fp16.h and the
# per-ISA helper headers kernels/isa_avx2.h / isa_avx512.h, which are the place for code the kernel
# files of one ISA share.
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
  set(TM_X86_64 ON)
else()
  set(TM_X86_64 OFF)
endif()

set(TM_AVX2_FLAGS -mavx2 -mfma -mf16c -mbmi2)
set(TM_AVX512_FLAGS -mavx2 -mfma -mf16c -mbmi2 -mavx512f -mavx512bw -mavx512vl -mavx512dq
    -mavx512vnni -mavx512bf16)
set(TM_AMX_FLAGS ${TM_AVX512_FLAGS} -mamx-tile -mamx-int8)
# The files that get one of those flag sets (and are left out off x86-64), in src/ and tests/ alike.
set(TM_ISA_FILE_REGEX "_(avx2|avx512|amx)\\.cpp$")

# Files the sanitized clang build (TM_SANITIZE / TM_FUZZ with clang) compiles at -O0: clang 14's
# AddressSanitizer (and its UBSan alike) at -O1 or -O2 spends 465 s on iq_gemm_avx512.cpp's unrolled
# intrinsics where gcc takes 21 s and clang without sanitizers 13 s; at -O0 it takes 5 s and the
# kernel's sanitized tests still run it (measured 2026-12-06, AMD EPYC). The release build is unaffected.
set(TM_SANITIZED_O0_FILES)
if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang" AND (TM_SANITIZE OR TM_FUZZ))
  set(TM_SANITIZED_O0_FILES ${TM_SOURCE_DIR}/src/kernels/iq_gemm_avx512.cpp)
endif()

# ISA flags for the *_avx2.cpp / *_avx512.cpp / *_amx.cpp files among srcs (x86-64 only).
function(tm_isa_flags srcs)
  if(NOT TM_X86_64)
    return()
  endif()
  foreach(f ${srcs})
    if(f MATCHES "_avx512\\.cpp$")
      set_source_files_properties(${f} PROPERTIES COMPILE_OPTIONS "${TM_AVX512_FLAGS}")
    elseif(f MATCHES "_amx\\.cpp$")
      set_source_files_properties(${f} PROPERTIES COMPILE_OPTIONS "${TM_AMX_FLAGS}")
    elseif(f MATCHES "_avx2\\.cpp$")
      set_source_files_properties(${f} PROPERTIES COMPILE_OPTIONS "${TM_AVX2_FLAGS}")
    endif()
    if(f IN_LIST TM_SANITIZED_O0_FILES)
      set_property(SOURCE ${f} APPEND PROPERTY COMPILE_OPTIONS -O0)
    endif()
  endforeach()
endfunction()

function(tm_module name)
  cmake_parse_arguments(M "" "" "DEPS;LIBS" ${ARGN})
  file(GLOB_RECURSE srcs CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/${name}/*.cpp)
  if(NOT TM_X86_64)
    list(FILTER srcs EXCLUDE REGEX "${TM_ISA_FILE_REGEX}")
  endif()
  if(NOT srcs)
    set(srcs ${TM_SOURCE_DIR}/cmake/empty.cpp)
  endif()
  tm_isa_flags("${srcs}")
  add_library(tm_${name} STATIC ${srcs})
  target_include_directories(tm_${name} PUBLIC ${TM_SOURCE_DIR}/src)
  set(deps)
  foreach(d ${M_DEPS})
    list(APPEND deps tm_${d})
  endforeach()
  target_link_libraries(tm_${name} PUBLIC ${deps} ${M_LIBS})
endfunction()
