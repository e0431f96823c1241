# Sourced by the scripts that run on the lent GPU machine: points the
# Vulkan loader at the NVIDIA ICD where it finds none in the usual places;
# `found_icd` says where one was found.
found_icd=""
for d in /etc/vulkan/icd.d /usr/share/vulkan/icd.d /usr/local/share/vulkan/icd.d; do
    ls "$d"/*nvidia*.json >/dev/null 2>&1 && found_icd="$d"
done
if [ -z "$found_icd" ] && [ -z "${VK_DRIVER_FILES:-}${VK_ICD_FILENAMES:-}" ] \
    && [ -e /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ]; then
    export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
fi
