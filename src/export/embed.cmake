# Turns the report's assets (report/report.{html,css,js}) into a C file of NUL-terminated arrays,
# so every report is one self-contained file written by the library. Run with -DOUT=... -DDIR=...
set(_c "/* Generated from src/export/report/ by embed.cmake: do not edit. */\n")
foreach(name html css js)
  file(READ "${DIR}/report.${name}" _hex HEX)
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," _hex "${_hex}")
  string(APPEND _c "const char mt_report_${name}[] = {${_hex}0};\n")
endforeach()
file(WRITE "${OUT}.tmp" "${_c}")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
