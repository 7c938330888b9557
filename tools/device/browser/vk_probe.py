#!/usr/bin/env python3
"""Lists what the Vulkan loader offers in this environment: the instance extensions and the physical
devices (name, type, vendor). Used on the device to see why a browser's GPU process cannot start
(ANGLE's Vulkan display needs VK_KHR_surface and a window-system surface extension) and which ICDs
VK_DRIVER_FILES reaches. Needs only libvulkan.so.1 (ctypes; no Vulkan SDK).
Usage: vk_probe.py [--lib PATH]   (env VK_DRIVER_FILES as the browser gets it)"""
import ctypes
import os
import sys

lib_path = sys.argv[sys.argv.index("--lib") + 1] if "--lib" in sys.argv else "libvulkan.so.1"
try:
    vk = ctypes.CDLL(lib_path)
except OSError as e:
    sys.exit(f"vk_probe: cannot load {lib_path}: {e}")


class ExtensionProperties(ctypes.Structure):  # VkExtensionProperties
    _fields_ = [("extensionName", ctypes.c_char * 256), ("specVersion", ctypes.c_uint32)]


class InstanceCreateInfo(ctypes.Structure):  # VkInstanceCreateInfo (sType 1)
    _fields_ = [("sType", ctypes.c_int), ("pNext", ctypes.c_void_p), ("flags", ctypes.c_uint32),
                ("pApplicationInfo", ctypes.c_void_p), ("enabledLayerCount", ctypes.c_uint32),
                ("ppEnabledLayerNames", ctypes.c_void_p), ("enabledExtensionCount", ctypes.c_uint32),
                ("ppEnabledExtensionNames", ctypes.c_void_p)]


print("VK_DRIVER_FILES=" + os.environ.get("VK_DRIVER_FILES", ""))
n = ctypes.c_uint32(0)
r = vk.vkEnumerateInstanceExtensionProperties(None, ctypes.byref(n), None)
props = (ExtensionProperties * n.value)()
r = vk.vkEnumerateInstanceExtensionProperties(None, ctypes.byref(n), props)
print(f"instance extensions ({n.value}, VkResult {r}):", " ".join(sorted(p.extensionName.decode() for p in props)))

inst = ctypes.c_void_p()
ci = InstanceCreateInfo(sType=1)
r = vk.vkCreateInstance(ctypes.byref(ci), None, ctypes.byref(inst))
if r != 0:
    sys.exit(f"vkCreateInstance: VkResult {r}")
cnt = ctypes.c_uint32(0)
vk.vkEnumeratePhysicalDevices(inst, ctypes.byref(cnt), None)
devs = (ctypes.c_void_p * cnt.value)()
vk.vkEnumeratePhysicalDevices(inst, ctypes.byref(cnt), devs)
types = {0: "other", 1: "integrated", 2: "discrete", 3: "virtual", 4: "cpu"}
for d in devs:
    buf = ctypes.create_string_buffer(1024)  # VkPhysicalDeviceProperties (824 bytes)
    vk.vkGetPhysicalDeviceProperties(ctypes.c_void_p(d), buf)
    api, drv, vendor, device, dtype = (int.from_bytes(buf.raw[i:i + 4], "little") for i in range(0, 20, 4))
    name = buf.raw[20:276].split(b"\0", 1)[0].decode()
    print(f"physical device: {name} ({types.get(dtype, dtype)}, vendor 0x{vendor:04x}, api "
          f"{api >> 22}.{(api >> 12) & 0x3ff}.{api & 0xfff})")
vk.vkDestroyInstance(inst, None)
