"""The kernelspec files (kernelspec/aries/: kernel.json and logos), shipped as package data for `aries-kernel install`."""
