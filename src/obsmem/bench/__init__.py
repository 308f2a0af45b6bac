"""Memory-quality benchmarks: what compression keeps, measured offline on public datasets."""
