"""Tests of the GitHub Actions workflows under .github/: linters, structure, and the scripts they run."""
