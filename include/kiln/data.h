// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// kiln::data (library kiln_data, CMake target kiln::data): datasets and their compositions,
// sources (IDX, CSV, image folders, SQLite), image transforms and the DataLoader.
// docs/data.md is the chapter.
#include "kiln/data/batch.h"
#include "kiln/data/dataset.h"
#include "kiln/data/image.h"
#include "kiln/data/loader.h"
#include "kiln/data/sources.h"
