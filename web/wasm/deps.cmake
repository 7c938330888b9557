# Dependencies of the WebAssembly build (included by the top-level CMakeLists.txt when EMSCRIPTEN).
# The same target names as the native find_package() results, so the engine's CMakeLists files
# are unchanged:
#   PkgConfig::PCRE2, PkgConfig::UTF8PROC  compiled with emcc from Debian's source packages of the
#       versions the native build links (scripts/setup.sh puts them in $WGLLM_CACHE/wasm-src)
#   fmt::fmt                header-only (FMT_HEADER_ONLY) from Debian's libfmt-dev headers
#   nlohmann_json::nlohmann_json  header-only from Debian's nlohmann-json3-dev
#   Threads::Threads        empty: the browser build is single-threaded (CPU backend unused)
# Debian's headers are reached through a folder of links holding only those libraries, never by
# putting /usr/include (glibc's headers) on emcc's include path.
set(WASM_SRC "${WGLLM_CACHE}/wasm-src")
set(PCRE2_SRC "${WASM_SRC}/pcre2-10.42/src")
set(UTF8PROC_SRC "${WASM_SRC}/utf8proc-2.8.0")
foreach(d "${PCRE2_SRC}" "${UTF8PROC_SRC}")
  if(NOT EXISTS "${d}")
    message(FATAL_ERROR "${d} not found: run `make setup` (scripts/setup.sh fetches the sources)")
  endif()
endforeach()
foreach(h /usr/include/fmt/core.h /usr/include/nlohmann/json.hpp)
  if(NOT EXISTS "${h}")
    message(FATAL_ERROR "${h} not found: install libfmt-dev and nlohmann-json3-dev (`make setup`)")
  endif()
endforeach()

set(WASM_HDR "${CMAKE_BINARY_DIR}/debian-headers")
file(MAKE_DIRECTORY "${WASM_HDR}")
foreach(lib fmt nlohmann)
  if(NOT EXISTS "${WASM_HDR}/${lib}")
    file(CREATE_LINK "/usr/include/${lib}" "${WASM_HDR}/${lib}" SYMBOLIC)
  endif()
endforeach()

add_library(fmt::fmt INTERFACE IMPORTED GLOBAL)
target_include_directories(fmt::fmt SYSTEM INTERFACE "${WASM_HDR}")
target_compile_definitions(fmt::fmt INTERFACE FMT_HEADER_ONLY=1)
add_library(nlohmann_json::nlohmann_json INTERFACE IMPORTED GLOBAL)
target_include_directories(nlohmann_json::nlohmann_json SYSTEM INTERFACE "${WASM_HDR}")
add_library(Threads::Threads INTERFACE IMPORTED GLOBAL)

# PCRE2 (8-bit, Unicode, no JIT), built the documented non-autotools way (NON-AUTOTOOLS-BUILD).
set(PCRE2_GEN "${CMAKE_BINARY_DIR}/pcre2-gen")
configure_file("${PCRE2_SRC}/config.h.generic" "${PCRE2_GEN}/config.h" COPYONLY)
configure_file("${PCRE2_SRC}/pcre2.h.generic" "${PCRE2_GEN}/pcre2.h" COPYONLY)
configure_file("${PCRE2_SRC}/pcre2_chartables.c.dist" "${PCRE2_GEN}/pcre2_chartables.c" COPYONLY)
set(PCRE2_FILES auto_possess compile config context convert dfa_match error extuni find_bracket
    jit_compile maketables match match_data newline ord2utf pattern_info script_run serialize
    string_utils study substitute substring tables ucd valid_utf xclass)
list(TRANSFORM PCRE2_FILES PREPEND "${PCRE2_SRC}/pcre2_")
list(TRANSFORM PCRE2_FILES APPEND ".c")
add_library(wasm_pcre2 STATIC ${PCRE2_FILES} "${PCRE2_GEN}/pcre2_chartables.c")
target_include_directories(wasm_pcre2 PRIVATE "${PCRE2_SRC}" PUBLIC "${PCRE2_GEN}")
target_compile_definitions(wasm_pcre2 PRIVATE HAVE_CONFIG_H SUPPORT_UNICODE
  PRIVATE PCRE2_CODE_UNIT_WIDTH=8 PUBLIC PCRE2_STATIC)
target_compile_options(wasm_pcre2 PRIVATE -w)
add_library(PkgConfig::PCRE2 ALIAS wasm_pcre2)

add_library(wasm_utf8proc STATIC "${UTF8PROC_SRC}/utf8proc.c")
target_include_directories(wasm_utf8proc PUBLIC "${UTF8PROC_SRC}")
target_compile_definitions(wasm_utf8proc PUBLIC UTF8PROC_STATIC)
target_compile_options(wasm_utf8proc PRIVATE -w)
add_library(PkgConfig::UTF8PROC ALIAS wasm_utf8proc)
