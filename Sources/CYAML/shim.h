// CYAML: Debian's yaml-0.1 headers for Swift. Only the wrapper module of this library imports it.
#pragma once
#include <yaml.h>
