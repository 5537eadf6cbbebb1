"""Thin async wrappers over yuxi's SQL functions: one Python function per SQL function."""
