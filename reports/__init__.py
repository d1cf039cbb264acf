"""HTML reports rendered from a verdict. A report never recomputes a verdict."""
