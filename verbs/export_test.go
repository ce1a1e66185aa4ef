package verbs

// DevicesFromSysfs exposes the sysfs fallback to the tests.
var DevicesFromSysfs = devicesFromSysfs
