# Turns a file into a C++ source that defines its bytes as a std::string_view,
# so that report.html carries its stylesheet and script without C++ raw
# strings: any content works, including )" and bytes outside ASCII.
#
#   cmake -DINPUT=report.css -DOUTPUT=report_css.cpp -DNAME=kReportCss -P embed_file.cmake
foreach(var INPUT OUTPUT NAME)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "embed_file.cmake: -D${var}=... is required")
  endif()
endforeach()
file(READ "${INPUT}" hex HEX)
# 16 bytes per line, each as 0xNN.
string(REGEX REPLACE "([0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f])"
       "\\1\n" hex "${hex}")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
get_filename_component(source "${INPUT}" NAME)
file(WRITE "${OUTPUT}.tmp"
  "// Generated at build time from ${source} by embed_file.cmake: do not edit.\n"
  "#include <string_view>\n\n"
  "namespace headlab::analysis {\n"
  "namespace {\n"
  "const unsigned char kBytes[] = {\n${bytes}0};\n"
  "}  // namespace\n"
  "extern const std::string_view ${NAME};\n"
  "const std::string_view ${NAME}(reinterpret_cast<const char*>(kBytes), sizeof kBytes - 1);\n"
  "}  // namespace headlab::analysis\n")
# Only a changed file touches the output, so an unchanged one rebuilds nothing.
file(COPY_FILE "${OUTPUT}.tmp" "${OUTPUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUTPUT}.tmp")
