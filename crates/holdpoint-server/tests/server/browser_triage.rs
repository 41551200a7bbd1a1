//! The approval page at volume in headless Chromium (issue 34 items 5, 6,
//! 7 and 10): rows that say what is at stake, filters and search, bulk
//! triage and the phone layout.
