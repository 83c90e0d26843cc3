# `cmake --install BUILD --prefix P`: the seqbench command and what an out-of-tree variant
# needs to build against it, and nothing else: the plugin API's headers (the variant
# interface, its registration, the plugin macro, each family's public model pieces and
# torch_compat.h: a closed set, the headers these include and no more, checked by
# tests/cli/install_test.sh, which builds examples/plugin against the prefix alone) and
# seqbenchConfig.cmake, whose `seqbench_add_plugin(NAME SOURCES...)` makes the module that
# `seqbench --plugin` loads. A plugin links no seqbench library: the command exports its
# symbols (ENABLE_EXPORTS) and dlopen() resolves the plugin's against it.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# The installed command finds the libraries it was linked with (LibTorch from a wheel or a
# CUDA build lies outside the system's library path) as the build tree's does.
set_target_properties(seqbench PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)
install(TARGETS seqbench RUNTIME DESTINATION "${CMAKE_INSTALL_BINDIR}")
# The counting child's preload (harness/valgrind_preload), where run --count looks for it.
if(TARGET seqbench_valgrind_preload)
  install(TARGETS seqbench_valgrind_preload LIBRARY DESTINATION "${CMAKE_INSTALL_LIBEXECDIR}/seqbench")
endif()

set(SEQBENCH_PLUGIN_HEADERS
    variants/core/language_model.h variants/core/plugin.h variants/core/registry.h
    variants/core/residual_model.h variants/core/torch_compat.h variants/core/variant.h
    variants/attention/model.h variants/lstm/model.h variants/min_gru/model.h
    variants/min_lstm/model.h variants/qrnn/model.h variants/rhn/model.h
    variants/simple_rnn/model.h)
foreach(header IN LISTS SEQBENCH_PLUGIN_HEADERS)
  get_filename_component(folder "${header}" DIRECTORY)
  install(FILES "${header}" DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}/seqbench/${folder}")
endforeach()

# What the plugin must match: the LibTorch and C++ standard seqbench was built with, and
# OpenMP where seqbench's own at::parallel_for runs on it (CMakeLists.txt).
set(SEQBENCH_TORCH_VERSION "${Torch_VERSION}")
set(SEQBENCH_CXX_STANDARD "${CMAKE_CXX_STANDARD}")
set(SEQBENCH_INCLUDE_INSTALL_DIR "${CMAKE_INSTALL_INCLUDEDIR}/seqbench")
set(SEQBENCH_BIN_INSTALL_DIR "${CMAKE_INSTALL_BINDIR}")
configure_package_config_file(
  "${PROJECT_SOURCE_DIR}/cmake/seqbenchConfig.cmake.in"
  "${PROJECT_BINARY_DIR}/seqbenchConfig.cmake"
  INSTALL_DESTINATION "${CMAKE_INSTALL_LIBDIR}/cmake/seqbench"
  PATH_VARS SEQBENCH_INCLUDE_INSTALL_DIR SEQBENCH_BIN_INSTALL_DIR)
write_basic_package_version_file("${PROJECT_BINARY_DIR}/seqbenchConfigVersion.cmake"
                                 COMPATIBILITY SameMinorVersion)
install(FILES "${PROJECT_BINARY_DIR}/seqbenchConfig.cmake"
              "${PROJECT_BINARY_DIR}/seqbenchConfigVersion.cmake"
        DESTINATION "${CMAKE_INSTALL_LIBDIR}/cmake/seqbench")
