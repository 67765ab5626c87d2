# abc as a vcpkg overlay port that installs the checkout it sits in (packaging/vcpkg/abc/ of the
# repository): vcpkg install abc --overlay-ports=<repository>/packaging/vcpkg
# A registry port would fetch a release archive with vcpkg_from_github instead; the steps after are
# the same.
get_filename_component(SOURCE_PATH "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)

# Header-only: nothing is compiled, the tests, examples and benchmarks are not configured.
set(VCPKG_BUILD_TYPE release)
vcpkg_cmake_configure(
  SOURCE_PATH "${SOURCE_PATH}"
  OPTIONS
    -DABC_BUILD_TESTS=OFF
    -DABC_BUILD_EXAMPLES=OFF
    -DABC_BUILD_BENCHMARKS=OFF
    -DABC_INSTALL=ON
)
vcpkg_cmake_install()
# abc installs its CMake package under share/cmake/abc (architecture-independent) and abc.pc under
# share/pkgconfig; vcpkg wants the package in share/abc.
vcpkg_cmake_config_fixup(PACKAGE_NAME abc CONFIG_PATH share/cmake/abc)
vcpkg_fixup_pkgconfig()
file(REMOVE_RECURSE "${CURRENT_PACKAGES_DIR}/share/doc")
vcpkg_install_copyright(FILE_LIST "${SOURCE_PATH}/LICENSE")
