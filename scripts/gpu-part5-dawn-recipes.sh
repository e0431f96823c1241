# GPU part 5 of 5 (timeouts summed: 480 s): mxfp8's and nvfp4's base
# steps on Dawn, its subgroup matrices off and on: part 4's harness for
# those recipes. Carried as part 4 says.
PRECISIONS=mxfp8,nvfp4 exec bash "$(dirname "$0")/gpu-part4-dawn.sh" units
