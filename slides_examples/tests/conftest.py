def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: uses the local GPU (runs with the GPU tests, after the others)")
