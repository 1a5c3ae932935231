//! Quick versions of the everest reproductions, asserting their qualitative results.

use super::*;
use crate::experiments::quick;
