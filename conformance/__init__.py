"""ftspec.conformance"""
