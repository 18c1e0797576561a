# Install rules and the Debian package (docs/deploy.md, "Debian package"):
#   cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release && cmake --build build --target tokenmill
#   cd build && cpack -G DEB        # -> build/tokenmill_<version>_<arch>.deb
# `install`/`cpack` do not build anything first (CMAKE_SKIP_INSTALL_ALL_DEPENDENCY): they package
# the tokenmill binary already built, so building the tests is never needed for a package.
# Layout (prefix /usr in the package): bin/tokenmill, share/tokenmill/models/stories260K/ (the
# default model, found by tokenmill relative to its own path: cli_common.cpp), share/doc/tokenmill/,
# share/man/man1/tokenmill.1.gz (made from --help at install time), lib/systemd/system/
# tokenmill.service, and /etc/tokenmill/config.yaml + /etc/default/tokenmill (conffiles).
include(GNUInstallDirs)

set(TM_SYSCONFDIR "/etc/tokenmill" CACHE PATH "Where the packaged config.yaml goes (absolute)")
set(TM_UNIT_BINDIR "/usr/bin" CACHE PATH "Directory of tokenmill in the systemd unit's ExecStart")

install(TARGETS tokenmill RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES
  ${TM_SOURCE_DIR}/models/stories260K/stories260K.gguf
  ${TM_SOURCE_DIR}/models/stories260K/README.md
  ${TM_SOURCE_DIR}/models/stories260K/PROVENANCE.txt
  ${TM_SOURCE_DIR}/models/stories260K/SHA256SUMS
  DESTINATION ${CMAKE_INSTALL_DATADIR}/tokenmill/models/stories260K)
file(GLOB tm_docs ${TM_SOURCE_DIR}/docs/*.md)
install(FILES ${TM_SOURCE_DIR}/README.md ${tm_docs} DESTINATION ${CMAKE_INSTALL_DOCDIR})

# The man page: from the built binary's --help texts, at install time.
set(tm_man ${CMAKE_BINARY_DIR}/tokenmill.1.gz)
install(CODE "
  execute_process(COMMAND sh ${TM_SOURCE_DIR}/cmake/tm_manpage.sh \"$<TARGET_FILE:tokenmill>\" ${PROJECT_VERSION} ${tm_man}
                  RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR \"tm_manpage.sh failed (\${rc})\")
  endif()")
install(FILES ${tm_man} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)

configure_file(${TM_SOURCE_DIR}/deploy/systemd/tokenmill.service.in ${CMAKE_BINARY_DIR}/tokenmill.service @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/tokenmill.service DESTINATION lib/systemd/system)
install(FILES ${TM_SOURCE_DIR}/deploy/config.yaml DESTINATION ${TM_SYSCONFDIR})
install(FILES ${TM_SOURCE_DIR}/deploy/debian/default DESTINATION /etc/default RENAME tokenmill)

if(NOT DEFINED CMAKE_SKIP_INSTALL_ALL_DEPENDENCY)
  set(CMAKE_SKIP_INSTALL_ALL_DEPENDENCY ON)
endif()

set(CPACK_PACKAGE_NAME tokenmill)
set(CPACK_PACKAGE_VENDOR "tokenmill")
set(CPACK_PACKAGE_CONTACT "tokenmill maintainers <tokenmill@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "LLM inference server with an OpenAI-compatible API")
set(CPACK_PACKAGE_DESCRIPTION
    "tokenmill serves GGUF language models over an OpenAI-compatible HTTP API (continuous batching, paged KV cache, prefix caching, structured output, Prometheus metrics with vLLM's names). Ships a systemd unit and a tiny demo model.")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_PACKAGE_DIRECTORY ${CMAKE_BINARY_DIR})
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)  # dpkg-shlibdeps (dpkg-dev) computes Depends from the binary
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${TM_SOURCE_DIR}/deploy/debian/conffiles ${TM_SOURCE_DIR}/deploy/debian/postinst
    ${TM_SOURCE_DIR}/deploy/debian/prerm ${TM_SOURCE_DIR}/deploy/debian/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_STRIP_FILES ON)
include(CPack)
