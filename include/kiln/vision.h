// SPDX-License-Identifier: MIT OR Apache-2.0
// kiln::vision: detection ops with torchvision's semantics and image processing with OpenCV's,
// over Kiln tensors (library kiln::vision, part of the umbrella kiln::kiln). docs/vision.md.
#pragma once

#include "kiln/vision/boxes.h"
#include "kiln/vision/deform.h"
#include "kiln/vision/image.h"
#include "kiln/vision/roi.h"
#include "kiln/vision/transforms.h"
