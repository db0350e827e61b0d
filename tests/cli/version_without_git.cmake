# Built from a tarball (no .git), `headlab --version` says "git unknown":
# runs cmake/version_header.cmake on a folder without git and checks the header.
#   cmake -DSCRIPT=... -DWORK=<scratch folder> -P version_without_git.cmake
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}/src")
execute_process(COMMAND "${CMAKE_COMMAND}" -DSOURCE_DIR=${WORK}/src -DOUTPUT=${WORK}/version.h -DVERSION=9.8.7
  -P "${SCRIPT}" RESULT_VARIABLE failed)
if(failed)
  message(FATAL_ERROR "version_header.cmake failed: ${failed}")
endif()
file(READ "${WORK}/version.h" text)
if(NOT text MATCHES "\"headlab 9\\.8\\.7 \\(git unknown\\)\"")
  message(FATAL_ERROR "expected \"headlab 9.8.7 (git unknown)\" in the header, got:\n${text}")
endif()
