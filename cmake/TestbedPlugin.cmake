# testbed_add_plugin(<name> SOURCES <files...> [CUDA_SOURCES <files...>] [LIBRARIES <targets...>]
#                    [OUTPUT_DIRECTORY <dir>] [EXPORT_ALL])
#
# Builds a testbed plugin: a MODULE library named <name>.so that exports one entry symbol,
# `testbed_plugin` (see testbed/plugin.h), and links the core. A linker version script hides
# everything else (including what static libraries and header-only code would export), so two
# plugins may use the same names without seeing each other's; EXPORT_ALL keeps the default
# visibility rules instead (for tests of symbol clashes). CUDA_SOURCES are compiled only when
# the CUDA language is enabled in the including project.
function(testbed_add_plugin name)
  cmake_parse_arguments(ARG "EXPORT_ALL" "OUTPUT_DIRECTORY" "SOURCES;CUDA_SOURCES;LIBRARIES" ${ARGN})
  set(sources ${ARG_SOURCES})
  get_property(languages GLOBAL PROPERTY ENABLED_LANGUAGES)
  if(ARG_CUDA_SOURCES AND "CUDA" IN_LIST languages)
    list(APPEND sources ${ARG_CUDA_SOURCES})
  endif()
  add_library(${name} MODULE ${sources})
  if(TARGET testbed_core)
    target_link_libraries(${name} PRIVATE testbed_core)
  else()
    target_link_libraries(${name} PRIVATE Testbed::core)
  endif()
  if(ARG_LIBRARIES)
    target_link_libraries(${name} PRIVATE ${ARG_LIBRARIES})
  endif()
  if(ARG_CUDA_SOURCES AND "CUDA" IN_LIST languages)
    target_compile_definitions(${name} PRIVATE TESTBED_PLUGIN_HAS_CUDA=1)
  endif()
  if(NOT ARG_EXPORT_ALL)
    set(script "${CMAKE_CURRENT_BINARY_DIR}/${name}_exports.map")
    file(WRITE "${script}" "{\n  global: testbed_plugin;\n  local: *;\n};\n")
    target_link_options(${name} PRIVATE "LINKER:--version-script=${script}")
    set_property(TARGET ${name} APPEND PROPERTY LINK_DEPENDS "${script}")
  endif()
  set_target_properties(${name} PROPERTIES
    PREFIX ""
    CXX_VISIBILITY_PRESET hidden
    CUDA_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON
    INSTALL_RPATH "$ORIGIN/../..")
  if(ARG_OUTPUT_DIRECTORY)
    set_target_properties(${name} PROPERTIES LIBRARY_OUTPUT_DIRECTORY "${ARG_OUTPUT_DIRECTORY}")
  elseif(DEFINED TESTBED_PLUGIN_OUTPUT_DIR)
    set_target_properties(${name} PROPERTIES LIBRARY_OUTPUT_DIRECTORY "${TESTBED_PLUGIN_OUTPUT_DIR}")
  endif()
  if(DEFINED TESTBED_PLUGIN_SUBDIR AND NOT ARG_OUTPUT_DIRECTORY)
    install(TARGETS ${name} LIBRARY DESTINATION ${TESTBED_PLUGIN_SUBDIR})
    # `testbed_plugins` builds every plugin of this project (what the `testbed` wrapper needs).
    if(TARGET testbed_plugins)
      add_dependencies(testbed_plugins ${name})
    endif()
  endif()
endfunction()

# testbed_add_cuda_twin(<library> <DEFINE> <sources...>): when the build has CUDA, compiles the
# CUDA twins of a plugin's algorithm into <library>, defines <DEFINE>=1 for it and its users
# (tests skip the GPU checks without it) and links the CUDA runtime. Without CUDA, nothing.
function(testbed_add_cuda_twin library define)
  get_property(languages GLOBAL PROPERTY ENABLED_LANGUAGES)
  if("CUDA" IN_LIST languages)
    target_sources(${library} PRIVATE ${ARGN})
    target_compile_definitions(${library} PUBLIC ${define}=1)
    target_link_libraries(${library} PUBLIC CUDA::cudart)
  endif()
endfunction()
