//! Bounded text: validated human text fields and normalized diagnostics.
//! (being implemented)
