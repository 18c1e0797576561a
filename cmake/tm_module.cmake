# tm_module(NAME DEPS a b ... LIBS x y ...)
# Builds the static library tm_NAME from every src/NAME/**/*.cpp (globbed, so adding a file needs
# no CMake edit). Files ending in _avx2.cpp / _avx512.cpp get that ISA's flags; nothing else does,
# so the rest of the binary runs on any x86-64. ISA files must include only <immintrin.h>, C headers
# and plain-data headers: inline functions compiled with AVX-512 flags could otherwise be picked by
# the linker for the whole program (ODR).
set(TM_AVX2_FLAGS -mavx2 -mfma -mf16c -mbmi2)
set(TM_AVX512_FLAGS -mavx2 -mfma -mf16c -mbmi2 -mavx512f -mavx512bw -mavx512vl -mavx512dq
    -mavx512vnni -mavx512bf16)

function(tm_isa_flags srcs)
  foreach(f ${srcs})
    if(f MATCHES "_avx512\\.cpp$")
      set_source_files_properties(${f} PROPERTIES COMPILE_OPTIONS "${TM_AVX512_FLAGS}")
    elseif(f MATCHES "_avx2\\.cpp$")
      set_source_files_properties(${f} PROPERTIES COMPILE_OPTIONS "${TM_AVX2_FLAGS}")
    endif()
  endforeach()
endfunction()

function(tm_module name)
  cmake_parse_arguments(M "" "" "DEPS;LIBS" ${ARGN})
  file(GLOB_RECURSE srcs CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/${name}/*.cpp)
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
