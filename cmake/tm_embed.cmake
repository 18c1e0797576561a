# tm_embed_assets(TARGET NAMESPACE HEADER BASE_DIR FILES ...)
# Embeds files (HTML, JavaScript, CSS, ...) into a library at build time, so they stay real files in the
# source tree (editable, lintable) and the binary needs nothing at run time.
#
#   tm_embed_assets(TARGET tm_loadgen NAMESPACE tmill::loadgen::assets HEADER loadgen/embedded_assets.h
#                   BASE_DIR loadgen/assets FILES report.js report.css)
#
# BASE_DIR is relative to the calling CMakeLists.txt's folder, FILES relative to BASE_DIR; a file's path
# in FILES ('/'-separated) is its lookup key. The generated header (#include "<HEADER>") declares in
# NAMESPACE (types in core/embedded_asset.h):
#   std::span<const tmill::EmbeddedAsset> all();            // every file, sorted by path
#   const tmill::EmbeddedAsset* find(std::string_view path); // nullptr when not embedded
# Generated files go to the build tree (tm_embed/<TARGET>/; one target may embed several folders, each
# with its own NAMESPACE and HEADER); the data are char arrays with explicit
# lengths. Editing an asset regenerates and recompiles only the data file.
set(TM_EMBED_SCRIPT ${CMAKE_CURRENT_LIST_DIR}/tm_embed_generate.cmake)

function(tm_embed_assets)
  cmake_parse_arguments(E "" "TARGET;NAMESPACE;HEADER;BASE_DIR" "FILES" ${ARGN})
  if(NOT E_TARGET OR NOT E_NAMESPACE OR NOT E_HEADER OR NOT E_BASE_DIR OR NOT E_FILES)
    message(FATAL_ERROR "tm_embed_assets: TARGET, NAMESPACE, HEADER, BASE_DIR and FILES are required")
  endif()
  get_filename_component(base ${E_BASE_DIR} ABSOLUTE BASE_DIR ${CMAKE_CURRENT_SOURCE_DIR})
  set(inputs)
  foreach(f ${E_FILES})
    if(NOT EXISTS ${base}/${f})
      message(FATAL_ERROR "tm_embed_assets: ${base}/${f} does not exist")
    endif()
    list(APPEND inputs ${base}/${f})
  endforeach()
  set(gen_dir ${CMAKE_CURRENT_BINARY_DIR}/tm_embed/${E_TARGET})
  string(MAKE_C_IDENTIFIER ${E_NAMESPACE} stem)
  set(out_h ${gen_dir}/${E_HEADER})
  set(out_cpp ${gen_dir}/${stem}.cpp)
  list(JOIN E_FILES "|" files_arg)  # '|': a ';' list would be split on the command line
  list(JOIN E_FILES ", " files_shown)
  add_custom_command(
    OUTPUT ${out_h} ${out_cpp}
    COMMAND ${CMAKE_COMMAND} -DNAMESPACE=${E_NAMESPACE} -DHEADER=${E_HEADER} -DBASE_DIR=${base}
            "-DFILES=${files_arg}" -DOUT_H=${out_h} -DOUT_CPP=${out_cpp} -P ${TM_EMBED_SCRIPT}
    DEPENDS ${inputs} ${TM_EMBED_SCRIPT}
    COMMENT "Embedding assets into ${E_TARGET}: ${files_shown}"
    VERBATIM)
  target_sources(${E_TARGET} PRIVATE ${out_cpp} ${out_h})
  target_include_directories(${E_TARGET} PUBLIC ${gen_dir})
endfunction()
