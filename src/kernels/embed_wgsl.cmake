# Generates a C++ file holding every kernels/wgsl/*.wgsl file as a string (so binaries need no
# shader files at run time). Invoked at build time with -DOUT=<file.cpp> -DDIR=<wgsl folder>.
file(GLOB FILES ${DIR}/*.wgsl)
list(SORT FILES)
set(body "// Generated from src/kernels/wgsl/*.wgsl by embed_wgsl.cmake. Do not edit.\n#include \"kernels/wgsl.h\"\n#include <map>\n#include <string>\nnamespace wgllm::kernels {\nconst std::map<std::string, std::string_view>& wgsl_sources() {\n  static const std::map<std::string, std::string_view> m = {\n")
foreach(f ${FILES})
  get_filename_component(name ${f} NAME_WE)
  file(READ ${f} content)
  string(APPEND body "    {\"${name}\", R\"wgsl(${content})wgsl\"},\n")
endforeach()
string(APPEND body "  };\n  return m;\n}\n}  // namespace wgllm::kernels\n")
file(WRITE ${OUT}.tmp "${body}")
execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different ${OUT}.tmp ${OUT})
