"""The SDK's version, also sent as the User-Agent so server logs show which clients talk."""

__version__ = "0.1.0"
USER_AGENT = f"werk-client-python/{__version__}"
