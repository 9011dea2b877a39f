# `cmake --install build --prefix DIR` gives DIR/include/baton, the library and a CMake
# package, so another project does find_package(baton CONFIG REQUIRED) and links baton::baton.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS baton EXPORT batonTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/baton DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT batonTargets NAMESPACE baton:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/baton)

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/batonConfig.cmake.in
  ${CMAKE_BINARY_DIR}/batonConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/baton)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/batonConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/batonConfig.cmake ${CMAKE_BINARY_DIR}/batonConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/baton)
