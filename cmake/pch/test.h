// The tests' precompiled header: the product's and GoogleTest's (cmake/FabricHelpers.cmake).
#pragma once

#include "cmake/pch/product.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
