# Extracts the code blocks marked <!-- example: NAME --> from README.md, installs the build
# tree into a scratch prefix, builds the example against the installed package and checks
# that the installed `testbed` loads it and runs an experiment with it.
cmake_minimum_required(VERSION 3.20)
foreach(var README BUILD_TREE WORK GENERATOR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "readme_plugin_test: ${var} is not set")
  endif()
endforeach()

function(run_step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}\n${err}")
  endif()
  set(step_output "${out}${err}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE "${WORK}")
set(src "${WORK}/src")
set(prefix "${WORK}/prefix")
set(build "${WORK}/build")

# 1. The example files, exactly as README.md has them. (Read as one string: a list of lines
# would split the C++ at its semicolons.)
file(READ "${README}" rest)
set(names "")
while(TRUE)
  string(FIND "${rest}" "<!-- example: " at)
  if(at EQUAL -1)
    break()
  endif()
  math(EXPR at "${at} + 14")
  string(SUBSTRING "${rest}" ${at} -1 rest)
  string(FIND "${rest}" " -->" end)
  string(SUBSTRING "${rest}" 0 ${end} name)
  math(EXPR end "${end} + 4")
  string(SUBSTRING "${rest}" ${end} -1 rest)
  # The block must follow the marker directly.
  string(FIND "${rest}" "```" fence)
  string(SUBSTRING "${rest}" 0 ${fence} between)
  string(STRIP "${between}" between)
  if(fence EQUAL -1 OR NOT between STREQUAL "")
    message(FATAL_ERROR "README.md: the marker for ${name} is not followed by a code block")
  endif()
  string(SUBSTRING "${rest}" ${fence} -1 rest)
  string(FIND "${rest}" "\n" eol)
  math(EXPR eol "${eol} + 1")
  string(SUBSTRING "${rest}" ${eol} -1 rest)
  string(FIND "${rest}" "\n```" close)
  if(close EQUAL -1)
    message(FATAL_ERROR "README.md: the code block of ${name} is not closed")
  endif()
  math(EXPR close "${close} + 1")
  string(SUBSTRING "${rest}" 0 ${close} body)
  file(WRITE "${src}/${name}" "${body}")
  list(APPEND names "${name}")
  string(SUBSTRING "${rest}" ${close} -1 rest)
endwhile()
foreach(expected CMakeLists.txt hello_plugin.cc)
  if(NOT expected IN_LIST names)
    message(FATAL_ERROR "README.md has no <!-- example: ${expected} --> block (found: ${names})")
  endif()
  file(SIZE "${src}/${expected}" size)
  if(size EQUAL 0)
    message(FATAL_ERROR "README.md example ${expected} is empty")
  endif()
endforeach()

# 2. Install the build tree.
run_step("cmake --install" ${CMAKE_COMMAND} --install "${BUILD_TREE}" --prefix "${prefix}")
foreach(f bin/testbed lib/cmake/Testbed/TestbedConfig.cmake include/testbed/plugin.h
          share/testbed/configs/clusters/hpwnv.toml)
  if(NOT EXISTS "${prefix}/${f}")
    message(FATAL_ERROR "the install has no ${f}")
  endif()
endforeach()

# 3. Configure and build the example against the installed package only.
set(type_arg "")
if(BUILD_TYPE)
  set(type_arg "-DCMAKE_BUILD_TYPE=${BUILD_TYPE}")
endif()
run_step("configuring the example" ${CMAKE_COMMAND} -S "${src}" -B "${build}" -G "${GENERATOR}"
         "-DCMAKE_PREFIX_PATH=${prefix}" ${type_arg})
run_step("building the example" ${CMAKE_COMMAND} --build "${build}")
if(NOT EXISTS "${build}/hello.so")
  message(FATAL_ERROR "the example built no hello.so in ${build}")
endif()

# 4. The installed executable lists the component and its two parameters.
run_step("testbed plugins" ${CMAKE_COMMAND} -E env "TESTBED_PLUGIN_PATH=${build}"
         "${prefix}/bin/testbed" plugins --kind partitioner)
foreach(needle "${build}/hello.so" "hello.even" "stages" "recompute" "pipeline depth")
  string(FIND "${step_output}" "${needle}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "`testbed plugins` does not show '${needle}':\n${step_output}")
  endif()
endforeach()

# 5. ... and runs an experiment with it, presets and default device model from the install.
file(WRITE "${WORK}/hello.toml" "partitioner = { use = \"hello.even\", stages = 4 }
[experiment]
name = \"hello\"
backend = \"plan\"
output = \"${WORK}/hello.h5\"
[cluster]
preset = \"hpwnv\"
[model]
preset = \"gpt-1.5b\"
[[arm]]
name = \"even\"
")
run_step("testbed run" ${CMAKE_COMMAND} -E env "TESTBED_PLUGIN_PATH=${build}" "${prefix}/bin/testbed" run -q
         "${WORK}/hello.toml")
string(FIND "${step_output}" "1 runs: 1 ran" at)
if(at EQUAL -1)
  message(FATAL_ERROR "the experiment with hello.even did not run:\n${step_output}")
endif()
run_step("testbed show" "${prefix}/bin/testbed" show --run even "${WORK}/hello.h5")
string(REGEX MATCH "pp +4 " pp_line "${step_output}")
if(pp_line STREQUAL "")
  message(FATAL_ERROR "the run does not have pp = 4:\n${step_output}")
endif()
file(REMOVE_RECURSE "${WORK}")
