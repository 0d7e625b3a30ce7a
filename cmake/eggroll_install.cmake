# Installs the library, headers, CLI and an exported CMake package (find_package(eggroll)).
include(CMakePackageConfigHelpers)
install(TARGETS eggroll EXPORT eggrollTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS eggroll_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY include/eggroll DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT eggrollTargets NAMESPACE eggroll:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/eggroll)
configure_package_config_file(cmake/eggrollConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/eggrollConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/eggroll)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/eggrollConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/eggrollConfig.cmake
  ${CMAKE_CURRENT_BINARY_DIR}/eggrollConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/eggroll)
