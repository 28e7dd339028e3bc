"""The reference engine: every op in numpy, the meaning the other engines are checked against."""
